//! The build script's cfgs against Cargo's feature variables: `build.rs` is compiled in here
//! as a module and its decisions are checked for each feature and target that changes one.
//! (A feature whose variable the script misspelt had no effect on any target: `platform-base`
//! was looked up as `CARGO_FEATURE_PLATFORM-BASE`.)

#[allow(dead_code)]
#[path = "../build.rs"]
mod build_script;

use build_script::{cfgs, check_feature_vars, declared_features, feature_var};

/// Each feature of Cargo.toml and the variable Cargo sets for it (the Cargo book, "Environment
/// variables Cargo sets for build scripts": upper case, `-` as `_`), written out by hand.
const CARGO_VARIABLES: [(&str, &str); 9] = [
    ("default", "CARGO_FEATURE_DEFAULT"),
    ("alloc", "CARGO_FEATURE_ALLOC"),
    ("std", "CARGO_FEATURE_STD"),
    ("rseq", "CARGO_FEATURE_RSEQ"),
    ("capi", "CARGO_FEATURE_CAPI"),
    ("custom-protection", "CARGO_FEATURE_CUSTOM_PROTECTION"),
    ("riscv-gp", "CARGO_FEATURE_RISCV_GP"),
    ("platform-base", "CARGO_FEATURE_PLATFORM_BASE"),
    ("sim", "CARGO_FEATURE_SIM"),
];

fn declared() -> Vec<String> {
    declared_features(include_str!("../Cargo.toml"))
}

/// The cfgs for `features` on a target (`family`, `os`, `arch`), the features seen only
/// through the variables Cargo would set for them.
fn cfgs_with(features: &[&str], family: &str, os: &str, arch: &str) -> Vec<&'static str> {
    let vars: Vec<&str> = CARGO_VARIABLES
        .iter()
        .filter(|(name, _)| features.contains(name))
        .map(|&(_, var)| var)
        .collect();
    cfgs(
        |f| vars.contains(&feature_var(f).as_str()),
        family,
        os,
        arch,
    )
}

#[test]
fn every_feature_has_its_cargo_variable() {
    let declared = declared();
    let listed: Vec<&str> = CARGO_VARIABLES.iter().map(|&(name, _)| name).collect();
    assert_eq!(
        declared, listed,
        "Cargo.toml's features and this test's table differ: add the new feature's variable"
    );
    for (name, var) in CARGO_VARIABLES {
        assert_eq!(feature_var(name), var, "feature `{name}`");
    }
}

#[test]
fn each_feature_sets_its_cfg_where_it_applies() {
    let bare = ("", "none");
    for arch in ["aarch64", "riscv64"] {
        assert!(
            cfgs_with(&["platform-base"], bare.0, bare.1, arch)
                .contains(&"pcpu_base_from_platform"),
            "platform-base on {arch}"
        );
        assert!(!cfgs_with(&[], bare.0, bare.1, arch).contains(&"pcpu_base_from_platform"));
    }
    for arch in ["x86_64", "x86", "arm"] {
        assert!(!cfgs_with(&["platform-base"], bare.0, bare.1, arch)
            .contains(&"pcpu_base_from_platform"));
    }
    assert!(cfgs_with(&["capi"], bare.0, bare.1, "x86_64").contains(&"pcpu_c_abi"));
    assert!(!cfgs_with(&["capi"], "unix", "linux", "x86_64").contains(&"pcpu_c_abi"));
    assert!(cfgs_with(&["capi", "sim"], "unix", "linux", "x86_64").contains(&"pcpu_c_abi"));
    assert!(cfgs_with(&["rseq"], "unix", "linux", "aarch64").contains(&"pcpu_rseq"));
    assert!(!cfgs_with(&["rseq"], "unix", "linux", "riscv64").contains(&"pcpu_rseq"));
    assert!(cfgs_with(&[], "unix", "linux", "x86_64").contains(&"pcpu_no_cpu_register"));
    let sim = cfgs_with(&["sim"], "unix", "linux", "aarch64");
    assert!(sim.contains(&"pcpu_hosted_cpus") && sim.contains(&"pcpu_base_from_platform"));
    assert!(!sim.contains(&"pcpu_no_cpu_register"));
}

#[test]
fn a_variable_no_feature_maps_to_stops_the_build() {
    let declared = declared();
    let all: Vec<String> = CARGO_VARIABLES.iter().map(|&(_, v)| v.into()).collect();
    assert_eq!(check_feature_vars(&declared, &all), Ok(()));
    let wrong = vec!["CARGO_FEATURE_PLATFORM-BASE".to_string()];
    assert_eq!(
        check_feature_vars(&declared, &wrong),
        Err(
            "Cargo set CARGO_FEATURE_PLATFORM-BASE, which no feature of Cargo.toml maps to \
             through feature_var"
                .into()
        )
    );
}
