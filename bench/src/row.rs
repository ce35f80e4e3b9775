//! One line of the benchmark table: a figure always sits next to the
//! baseline it was measured against, and the goal it is judged by.
#![forbid(unsafe_code)]

/// A benchmark's verdict, as one table row.
pub struct Row {
    pub id: &'static str,
    pub what: &'static str,
    pub baseline: String,
    pub measured: String,
    pub goal: &'static str,
    pub met: bool,
}

/// The markdown table of `rows`.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| id | what | baseline (same run) | measured | goal | met? |\n|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let met = if r.met { "yes" } else { "**no**" };
        out += &format!(
            "| {} | {} | {} | {} | {} | {met} |\n",
            r.id, r.what, r.baseline, r.measured, r.goal
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missed_goal_stands_out() {
        let row = |met| Row {
            id: "P0",
            what: "w",
            baseline: "b".into(),
            measured: "m".into(),
            goal: "g",
            met,
        };
        let t = table(&[row(true), row(false)]);
        assert!(t.contains("| P0 | w | b | m | g | yes |"), "{t}");
        assert!(t.contains("| P0 | w | b | m | g | **no** |"), "{t}");
    }
}
