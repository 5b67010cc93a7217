#!/usr/bin/env bash
# tests/rseq.rs on a real arm64 Linux kernel: the aarch64 rseq critical section executed, not
# only compiled (qemu-aarch64, the user-mode emulator, has no rseq: there the crate takes its
# fallback). Cross-builds the test binary (release, as programs ship, in target/linux-vm/build;
# under TCG its suite runs in about 16 s against 57 s for a debug build), fetches Debian's
# arm64 kernel and busybox-static with apt's multiarch download options into
# target/linux-vm/cache (reused when present), packs an initramfs (busybox, ./init, the test
# binary and the aarch64 libraries it needs) and boots it under
# `qemu-system-aarch64 -M virt -cpu max,pauth-impdef=on -smp 4`. The initramfs prints the
# kernel, the path the crate chose, AT_RSEQ_FEATURE_SIZE and the registered length, whether
# the kernel is one the crate knows to lose rseq adds (aarch64 6.19.0 to 7.0.13, the rule of
# src/rseq/kernels.rs written again in ./init), runs a control (testbeds/linux-vm/rseq_add.c:
# the kernel's rseq section in plain C, whatever the crate chose; on a known-broken kernel
# until it loses an add), runs every test of tests/rseq.rs with 4 test threads, and powers
# off. Fails when the tests fail; when the path is not the kernel's: on a known-broken kernel
# the fallback naming it (`fallback: sched_getcpu + locked add (Linux 6.19.11 aborts no rseq
# section on arm64 (fixed in 7.0.14; PCPU_COUNTER_RSEQ=force overrides))`) unless
# LINUX_VM_ARGS has PCPU_COUNTER_RSEQ=force, else rseq (not cpu_id where the kernel offers
# mm_cid); when the C control lost adds on a kernel not known broken, or none on a known-broken
# one; when the marker line is missing; or after LINUX_VM_TIMEOUT seconds (default 600).
#
# LINUX_VM_KERNEL names the kernel package (default: what Debian's `linux-image-6.12-cloud-arm64`
# depends on; the cloud flavour is a third the size and has virt's PL011, virtio and
# CONFIG_RSEQ, CONFIG_SCHED_MM_CID), cached apart per package; LINUX_VM_DIST the Debian suite it
# comes from, instead of this machine's apt sources, e.g.
#   LINUX_VM_KERNEL=linux-binary-6.19.11+deb13-cloud-arm64 LINUX_VM_DIST=trixie-backports
# (any failure to list or fetch the packages fails the run with a line naming it).
# LINUX_VM_VMLINUZ boots another arm64 kernel image file instead; LINUX_VM_ARGS is appended to
# the kernel command line: `NAME=value` words become /init's environment, the words after `--`
# the test binary's arguments (default `--test-threads=4`), e.g.
# LINUX_VM_ARGS="PCPU_COUNTER_RSEQ=cpu -- --exact storm_profile". Installs its tools with
# apt-get when missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
vm=$root/target/linux-vm
cache=$vm/cache
timeout_s=${LINUX_VM_TIMEOUT:-600}
# LINUX_VM_ARCH=x86_64 boots Debian's amd64 kernels under qemu-system-x86_64 instead, with the
# native test binary and the x86_64 form of the C control.
arch=${LINUX_VM_ARCH:-aarch64}
need=()
case $arch in
    aarch64)
        target=aarch64-unknown-linux-gnu debarch=arm64 libdir=/usr/aarch64-linux-gnu/lib
        cc=aarch64-linux-gnu-gcc readelf=aarch64-linux-gnu-readelf console=ttyAMA0
        interp_want=/lib/ld-linux-aarch64.so.1
        qemu=(qemu-system-aarch64 -M virt -cpu max,pauth-impdef=on -smp 4 -m 4G)
        command -v qemu-system-aarch64 >/dev/null || need+=(qemu-system-arm)
        command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu)
        command -v aarch64-linux-gnu-readelf >/dev/null || need+=(binutils-aarch64-linux-gnu)
        [ -f "$libdir/libc.so.6" ] || need+=(libc6-dev-arm64-cross)
        ;;
    x86_64)
        target=x86_64-unknown-linux-gnu debarch=amd64 libdir=/lib/x86_64-linux-gnu
        cc=gcc readelf=readelf console=ttyS0 interp_want=/lib64/ld-linux-x86-64.so.2
        qemu=(qemu-system-x86_64 -M q35 -cpu max -smp 4 -m 4096)
        # TCG (`-accel kvm` with `-cpu max` failed here: KVM refused an MSR, nested).
        command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
        ;;
    *) echo "FAIL: LINUX_VM_ARCH=$arch: aarch64 or x86_64"; exit 1 ;;
esac
command -v cpio >/dev/null || need+=(cpio)
if [ ${#need[@]} -gt 0 ]; then
    apt-get update -q
    # `qemu-utils-` removes a newer qemu-utils that conflicts with Debian 12's qemu-system.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        "${need[@]}" qemu-utils-
fi
rustup target list --installed 2>/dev/null | grep -qx "$target" || rustup target add "$target"

echo "== linux-vm: building tests/rseq.rs for $target (release)"
# Fixed here, so that the build in target/linux-vm/build is reused whatever the caller's
# environment: no debug info (not read), no incremental cache.
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
    CARGO_PROFILE_RELEASE_DEBUG=0 CARGO_INCREMENTAL=0
bin=$(CARGO_TARGET_DIR=$vm/build cargo test --release --no-run --target "$target" --features rseq \
    --test rseq --message-format=json \
    | grep '"profile":{[^}]*"test":true' | grep -o '"executable":"[^"]*"' | cut -d'"' -f4)
[ -x "$bin" ] || { echo "FAIL: no test binary built"; exit 1; }
# The control: the same critical section in plain C (testbeds/linux-vm/rseq_add.c).
mkdir -p "$vm"
"$cc" -O2 -Wall -Werror -pthread testbeds/linux-vm/rseq_add.c -o "$vm/rseq_add-$arch"

# Debian's arm64 packages, downloaded with the machine's apt sources (or, with LINUX_VM_DIST,
# deb.debian.org's `$LINUX_VM_DIST` and its base suite) and package lists of its own (the
# system's apt state is not touched). A kernel named by LINUX_VM_KERNEL has a cache of its own.
# Any failure here (package lists, a package not found, a download) fails the run, naming it.
[ "$arch" = aarch64 ] || cache=$vm/cache-$debarch
[ -z "${LINUX_VM_KERNEL:-}" ] || cache=$vm/cache-$LINUX_VM_KERNEL
kernel_image() {
    ls "$cache"/root/boot/vmlinuz-* "$cache"/root/usr/lib/modules/*/vmlinuz 2>/dev/null \
        | head -1 || true
}
busybox() { ls "$cache"/root/bin/busybox "$cache"/root/usr/bin/busybox 2>/dev/null | head -1 || true; }
if [ -z "$(kernel_image)" ] || [ -z "$(busybox)" ]; then
    echo "== linux-vm: fetching Debian's $debarch kernel and busybox-static" \
        "${LINUX_VM_KERNEL:+($LINUX_VM_KERNEL${LINUX_VM_DIST:+ from $LINUX_VM_DIST})}"
    rm -rf "$cache"
    mkdir -p "$cache/lists/partial" "$cache/apt" "$cache/debs" "$cache/root"
    apt_opts=(-q "-oAPT::Architecture=$debarch" "-oAPT::Architectures=$debarch"
        "-oDir::State::Lists=$cache/lists" "-oDir::Cache=$cache/apt"
        -oAPT::Sandbox::User=root -oAcquire::IndexTargets::deb::DEP-11::DefaultEnabled=false)
    if [ -n "${LINUX_VM_DIST:-}" ]; then
        # e.g. trixie-backports: the suite itself and its base (trixie) for busybox-static.
        base=${LINUX_VM_DIST%%-*}
        printf 'deb http://deb.debian.org/debian %s main\n' "$base" "$LINUX_VM_DIST" \
            | sort -u >"$cache/sources.list"
        apt_opts+=("-oDir::Etc::SourceList=$cache/sources.list"
            -oDir::Etc::SourceParts=/nonexistent)
    fi
    # (apt-get update warns but succeeds when an index fails to download: the package lookups
    # below are what fail then.)
    apt-get "${apt_opts[@]}" update \
        || { echo "FAIL: apt-get update of the $debarch package lists failed"; exit 1; }
    kernel=${LINUX_VM_KERNEL:-$(apt-cache "${apt_opts[@]}" depends "linux-image-6.12-cloud-$debarch" \
        | sed -n 's/^ *Depends: \(linux-image-[^ ]*\)$/\1/p' | head -1)}
    [ -n "$kernel" ] || { echo "FAIL: no $debarch kernel package found"; exit 1; }
    for pkg in "$kernel" busybox-static; do
        apt-cache "${apt_opts[@]}" show "$pkg" >/dev/null 2>&1 \
            || { echo "FAIL: no package $pkg in the $debarch package lists"; exit 1; }
    done
    (cd "$cache/debs" && apt-get "${apt_opts[@]}" download "$kernel" busybox-static) \
        || { echo "FAIL: downloading $kernel and busybox-static failed"; exit 1; }
    for deb in "$cache"/debs/*.deb; do dpkg -x "$deb" "$cache/root"; done
    [ -n "$(kernel_image)" ] || { echo "FAIL: no vmlinuz in $kernel"; exit 1; }
    [ -n "$(busybox)" ] || { echo "FAIL: no busybox in busybox-static"; exit 1; }
fi
vmlinuz=$(kernel_image)
config=$(ls "$cache"/root/boot/config-* 2>/dev/null | head -1 || true)
echo "== linux-vm: kernel $vmlinuz:" \
    "$( [ -z "$config" ] || grep -E '^CONFIG_(RSEQ|SCHED_MM_CID)=' "$config" | tr '\n' ' ')"
if [ -n "${LINUX_VM_VMLINUZ:-}" ]; then
    vmlinuz=$LINUX_VM_VMLINUZ
    echo "== linux-vm: booting $vmlinuz instead (LINUX_VM_VMLINUZ)"
fi

# The initramfs: busybox, /init, the test binary, and the libraries it needs (its NEEDED
# entries and theirs, from the cross sysroot) with the program interpreter, in /lib.
echo "== linux-vm: initramfs"
initrd=$vm/initramfs
rm -rf "$initrd" && mkdir -p "$initrd/bin" "$initrd/lib"
cp "$(busybox)" "$initrd/bin/busybox"
cp testbeds/linux-vm/init "$initrd/init"
cp "$bin" "$initrd/rseq"
cp "$vm/rseq_add-$arch" "$initrd/rseq_add"
interp=$("$readelf" -l "$bin" | sed -n 's/.*interpreter: \(.*\)\]/\1/p')
[ "$interp" = "$interp_want" ] || { echo "FAIL: unexpected interpreter '$interp'"; exit 1; }
todo=("$bin")
while [ ${#todo[@]} -gt 0 ]; do
    elf=${todo[0]}
    todo=("${todo[@]:1}")
    for lib in $("$readelf" -d "$elf" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p') \
        "$(basename "$interp")"; do
        [ -e "$initrd/lib/$lib" ] && continue
        [ -f "$libdir/$lib" ] || { echo "FAIL: $lib not in $libdir"; exit 1; }
        cp -L "$libdir/$lib" "$initrd/lib/$lib"
        todo+=("$initrd/lib/$lib")
    done
done
# The program interpreter where the binary names it (x86_64: /lib64).
[ -e "$initrd$interp" ] || { mkdir -p "$initrd$(dirname "$interp")" \
    && cp -L "$libdir/$(basename "$interp")" "$initrd$interp"; }
echo "libraries: $(cd "$initrd/lib" && echo *)"
(cd "$initrd" && find . | cpio -o -H newc -R 0:0 --quiet) >"$vm/initramfs.cpio"

echo "== linux-vm: booting ${qemu[*]} (timeout ${timeout_s}s)"
log=$vm/console.log
qemu_status=0
timeout --foreground -k 10 "$timeout_s" "${qemu[@]}" \
    -nographic -no-reboot -kernel "$vmlinuz" -initrd "$vm/initramfs.cpio" \
    -append "console=$console panic=-1 quiet ${LINUX_VM_ARGS:-}" </dev/null 2>&1 | tr -d '\r' | tee "$log" \
    || qemu_status=$?
[ "$qemu_status" = 0 ] || echo "qemu exited with $qemu_status (124: timed out)"

result=$(sed -n 's/^linux-vm: result \([0-9]*\)$/\1/p' "$log" | tail -1)
path=$(grep -m1 '^path: ' "$log" || true)
release=$(sed -n 's/.*linux-vm: kernel \([^ ]*\) (.*/\1/p' "$log" | head -1)
broken=$(sed -n 's/^linux-vm: known broken: \(yes\|no\).*/\1/p' "$log")
[ -n "$result" ] || { echo "FAIL: no result line from the VM"; exit 1; }
[ -n "$broken" ] || { echo "FAIL: no 'known broken' line from the VM"; exit 1; }
[ -n "$release" ] || { echo "FAIL: no kernel line from the VM"; exit 1; }
# The control tests the kernel's rseq, not the crate's choice: sound kernels lose nothing; a
# kernel of the crate's table (aarch64 6.19 up to 7.0.14) must be shown losing adds.
if [ "$broken" = no ] && [ "$(grep -c '^rseq_add: .* lost 0$' "$log")" != 2 ]; then
    echo "FAIL: the kernel's rseq lost adds of the C control (rseq_add above, or it did not" \
        "run), on a kernel the crate does not know to be broken"
    exit 1
fi
if [ "$broken" = yes ]; then
    lost=$(grep -m1 '^rseq_add: .* lost [1-9]' "$log") \
        || { echo "FAIL: the C control lost no add on $release, which the table says loses them"; exit 1; }
    echo "linux-vm: the C control shows $release unsound: ${lost#rseq_add: }"
fi
[ "$result" = 0 ] || { echo "FAIL: tests/rseq.rs failed in the VM (status $result)"; exit 1; }
# The path the crate must have taken on this kernel (with no PCPU_COUNTER_RSEQ, or `force`).
if [ "$broken" = yes ] && [[ " ${LINUX_VM_ARGS:-} " != *" PCPU_COUNTER_RSEQ=force "* ]]; then
    patch=$(sed -n 's/^[0-9]*\.[0-9]*\.\([0-9][0-9]*\).*/\1/p' <<<"$release")
    v=$(sed -n 's/^\([0-9]*\.[0-9]*\).*/\1/p' <<<"$release").${patch:-0}
    want="path: fallback: sched_getcpu + locked add (Linux $v"
    want+=" aborts no rseq section on arm64 (fixed in 7.0.14; PCPU_COUNTER_RSEQ=force overrides));"
    [[ $path == "$want"* ]] || { echo "FAIL: on $release the crate must fall back:" \
        "'${path:-no path line}', expected '$want ...'"; exit 1; }
else
    by="glibc's registration"
    # glibc's registration off (LINUX_VM_ARGS): the crate registers each thread itself.
    [[ " ${LINUX_VM_ARGS:-} " != *" GLIBC_TUNABLES=glibc.pthread.rseq=0 "* ]] \
        || by="own registration of [0-9]* bytes"
    case $path in
        "path: rseq (index mm_cid, "$by");"*) ;;
        "path: rseq (index cpu_id, "$by");"*)
            # cpu_id is right only where the kernel does not offer mm_cid (feature size < 28).
            size=$(sed -n 's/.*AT_RSEQ_FEATURE_SIZE \([0-9]*\);.*/\1/p' <<<"$path")
            [ "${size:-0}" -lt 28 ] || { echo "FAIL: cpu_id index where the kernel offers mm_cid"; exit 1; }
            ;;
        *) echo "FAIL: the crate did not take the rseq path on $release: '${path:-no path line}'"; exit 1 ;;
    esac
fi
echo "linux-vm: tests/rseq.rs passed on $release with 4 vCPUs; ${path#path: }"
