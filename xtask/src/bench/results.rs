//! The benchmark's result lines (`section, name, parameter, value, unit`, tab-separated).

/// One result line.
pub struct Row {
    pub section: String,
    pub name: String,
    pub param: String,
    pub value: String,
    pub unit: String,
}

/// Every line of one run.
pub struct Results {
    rows: Vec<Row>,
}

impl Results {
    pub fn parse(text: &str) -> Result<Self, String> {
        let rows = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|line| {
                let f: Vec<&str> = line.split('\t').collect();
                match f[..] {
                    [section, name, param, value, unit] => Ok(Row {
                        section: section.into(),
                        name: name.into(),
                        param: param.into(),
                        value: value.into(),
                        unit: unit.into(),
                    }),
                    _ => Err(format!("bad result line {line:?}")),
                }
            })
            .collect::<Result<_, _>>()?;
        Ok(Results { rows })
    }

    /// The rows of `section`, in the order the run wrote them.
    pub fn section<'a>(&'a self, section: &'a str) -> impl Iterator<Item = &'a Row> + 'a {
        self.rows.iter().filter(move |r| r.section == section)
    }

    /// The value of the row `section/name/param` (and `unit`, where given), as text.
    pub fn text<'a>(
        &'a self,
        section: &'a str,
        name: &str,
        param: &str,
        unit: Option<&str>,
    ) -> Option<&'a str> {
        self.section(section)
            .find(|r| r.name == name && r.param == param && unit.is_none_or(|u| r.unit == u))
            .map(|r| r.value.as_str())
    }

    /// The number in the row `section/name/param` (and `unit`, where given).
    pub fn get(
        &self,
        section: &str,
        name: &str,
        param: &str,
        unit: Option<&str>,
    ) -> Result<f64, String> {
        let text = self
            .text(section, name, param, unit)
            .ok_or_else(|| format!("no result {section}/{name}/{param}"))?;
        text.parse()
            .map_err(|_| format!("result {section}/{name}/{param} is not a number: {text:?}"))
    }

    /// The distinct names in `section`, in first-seen order.
    pub fn names(&self, section: &str) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for row in self.section(section) {
            if !names.contains(&row.name) {
                names.push(row.name.clone());
            }
        }
        names
    }

    /// The distinct parameters in `section`, in first-seen order.
    pub fn params(&self, section: &str) -> Vec<String> {
        let mut params: Vec<String> = Vec::new();
        for row in self.section(section) {
            if !params.contains(&row.param) {
                params.push(row.param.clone());
            }
        }
        params
    }
}
