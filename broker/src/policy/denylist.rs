//! The command denylist: advisory regexes over `argv.join(" ")`.
//!
//! Security meaning: this is a tripwire for catastrophic mistakes, NOT a
//! boundary (any interpreter can build a denied token at run time). A pattern
//! anchored with `^` is *command-shaped*: it must fire on the program itself,
//! so it is also tried on the command line left after stripping any chain of
//! `sudo`/`doas`/`nohup`/`env [K=V…]`/`timeout [duration]` wrappers (each
//! optionally path-qualified, any case), which keeps `sudo shutdown` denied
//! while `grep -rn shutdown src/` is not. Unanchored patterns match anywhere.
//! Patterns compile with a bounded program size so a config cannot make every
//! call pay for a huge automaton.
#![forbid(unsafe_code)]

use regex::{Regex, RegexBuilder};
use regex_syntax::hir::Look;

use crate::config::ConfigError;

/// Compiled-program ceiling per pattern, in bytes.
const PATTERN_SIZE_LIMIT: usize = 1 << 20;

#[derive(Debug, Clone)]
struct Rule {
    source: String,
    regex: Regex,
    command_shaped: bool,
}

/// The compiled `denylist_patterns`.
#[derive(Debug, Clone)]
pub struct Denylist {
    rules: Vec<Rule>,
}

impl Denylist {
    /// Compiles every pattern; an empty or invalid one refuses the config and
    /// the error names it.
    pub fn compile(patterns: &[String]) -> Result<Denylist, ConfigError> {
        let mut rules = Vec::with_capacity(patterns.len());
        for source in patterns {
            if source.is_empty() {
                return Err(ConfigError::Policy(
                    "denylist_patterns: an empty pattern would deny every command".into(),
                ));
            }
            let regex = RegexBuilder::new(source)
                .size_limit(PATTERN_SIZE_LIMIT)
                .build()
                .map_err(|err| {
                    ConfigError::Policy(format!(
                        "denylist_patterns: {source:?} is not a valid regex: {err}"
                    ))
                })?;
            rules.push(Rule {
                source: source.clone(),
                regex,
                command_shaped: is_anchored_at_start(source),
            });
        }
        Ok(Denylist { rules })
    }

    /// The source of the first pattern the command matches, if any.
    pub fn check(&self, argv: &[String]) -> Option<&str> {
        let line = argv.join(" ");
        let unwrapped = if self.rules.iter().any(|r| r.command_shaped) {
            unwrapped_commands(&line)
        } else {
            Vec::new()
        };
        self.rules
            .iter()
            .find(|rule| {
                rule.regex.is_match(&line)
                    || (rule.command_shaped && unwrapped.iter().any(|cmd| rule.regex.is_match(cmd)))
            })
            .map(|rule| rule.source.as_str())
    }
}

/// True when every match of the pattern must start at the start of the
/// text: `^…`, possibly after inline flags such as `(?i)`.
fn is_anchored_at_start(pattern: &str) -> bool {
    regex_syntax::parse(pattern)
        .is_ok_and(|hir| hir.properties().look_set_prefix().contains(Look::Start))
}

/// Every suffix of `line` that starts at a command reached by stripping one
/// or more wrappers from the front, exploring both readings of `timeout X`
/// and of each `K=V` after `env`. Bounded by the number of words.
fn unwrapped_commands(line: &str) -> Vec<&str> {
    let starts: Vec<usize> = word_starts(line);
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut reached = vec![false; words.len() + 1];
    let mut pending = vec![0usize];
    while let Some(at) = pending.pop() {
        for next in wrapper_exits(&words, at) {
            if !reached[next] {
                reached[next] = true;
                pending.push(next);
            }
        }
    }
    (1..words.len())
        .filter(|&i| reached[i])
        .map(|i| &line[starts[i]..])
        .collect()
}

/// Word indices a command could start at after the wrapper at `at`; empty
/// when `words[at]` is no wrapper.
fn wrapper_exits(words: &[&str], at: usize) -> Vec<usize> {
    let Some(word) = words.get(at) else {
        return Vec::new();
    };
    let program = word.rsplit('/').next().unwrap_or(word);
    let is = |name: &str| program.eq_ignore_ascii_case(name);
    if is("sudo") || is("doas") || is("nohup") {
        vec![at + 1]
    } else if is("env") {
        let assignments = words[at + 1..]
            .iter()
            .take_while(|w| w.find('=').is_some_and(|i| i > 0))
            .count();
        (at + 1..=at + 1 + assignments).collect()
    } else if is("timeout") {
        vec![at + 1, at + 2]
            .into_iter()
            .filter(|&i| i <= words.len())
            .collect()
    } else {
        Vec::new()
    }
}

/// Byte offsets where each whitespace-separated word of `line` starts.
fn word_starts(line: &str) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut in_word = false;
    for (i, c) in line.char_indices() {
        if c.is_whitespace() {
            in_word = false;
        } else if !in_word {
            in_word = true;
            starts.push(i);
        }
    }
    starts
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seed's seven patterns (§9.3), command-shaped ones in simple form.
    fn seed() -> Denylist {
        let patterns = [
            r"rm\s+-rf\s+/",
            r":\(\)\s*\{\s*:\|",
            r"(?i)^(\S*/)?mkfs",
            r"(?i)^(\S*/)?dd\s+if=",
            r"(?i)^(\S*/)?shutdown\b",
            r"(?i)^(\S*/)?reboot\b",
            r"/etc/shadow",
        ];
        Denylist::compile(&patterns.map(String::from)).unwrap()
    }

    fn argv(line: &str) -> Vec<String> {
        shell_words::split(line).unwrap()
    }

    #[test]
    fn wrapped_catastrophes_hit() {
        let d = seed();
        let cases = [
            ("shutdown -h now", r"(?i)^(\S*/)?shutdown\b"),
            ("sudo shutdown -h now", r"(?i)^(\S*/)?shutdown\b"),
            ("/sbin/shutdown -r", r"(?i)^(\S*/)?shutdown\b"),
            ("env A=1 reboot", r"(?i)^(\S*/)?reboot\b"),
            ("env reboot", r"(?i)^(\S*/)?reboot\b"),
            ("timeout 10 shutdown", r"(?i)^(\S*/)?shutdown\b"),
            ("timeout shutdown", r"(?i)^(\S*/)?shutdown\b"),
            ("nohup sudo env X=1 mkfs.ext4 /dev/sda", r"(?i)^(\S*/)?mkfs"),
            ("SUDO shutdown", r"(?i)^(\S*/)?shutdown\b"),
            (
                "/usr/bin/Sudo /usr/bin/DOAS reboot",
                r"(?i)^(\S*/)?reboot\b",
            ),
            (
                "sudo timeout 5s env A=1 B=2 dd if=/dev/zero of=/dev/sda",
                r"(?i)^(\S*/)?dd\s+if=",
            ),
            ("echo rm -rf /", r"rm\s+-rf\s+/"),
            ("sudo rm -rf /", r"rm\s+-rf\s+/"),
            (":(){ :|:& };:", r":\(\)\s*\{\s*:\|"),
            ("cat /etc/shadow", "/etc/shadow"),
        ];
        for (line, pattern) in cases {
            assert_eq!(d.check(&argv(line)), Some(pattern), "{line}");
        }
    }

    #[test]
    fn mentions_in_arguments_do_not_hit() {
        let d = seed();
        for line in [
            "grep -rn shutdown src/",
            r#"rg "dd if=" docs/"#,
            "git log --grep mkfs",
            "echo reboot",
            "man shutdown",
            "shutdownx",
            "sudoers shutdown",
            "timeout 10 20 shutdown",
            "env -i shutdown",
            "ls",
        ] {
            assert_eq!(d.check(&argv(line)), None, "{line}");
        }
        assert_eq!(d.check(&[]), None);
    }

    #[test]
    fn a_trailing_wrapper_alone_is_harmless() {
        let d = seed();
        for line in ["sudo", "timeout 10", "env A=1", "nohup"] {
            assert_eq!(d.check(&argv(line)), None, "{line}");
        }
    }

    #[test]
    fn anchoring_is_read_from_the_regex_itself() {
        assert!(is_anchored_at_start("^a"));
        assert!(is_anchored_at_start("(?i)^a"));
        assert!(is_anchored_at_start("(?i)(?s)^(\\S*/)?a"));
        assert!(is_anchored_at_start("^a|^b"));
        assert!(!is_anchored_at_start("a|^b"));
        assert!(!is_anchored_at_start("rm\\s+-rf"));
        assert!(!is_anchored_at_start("(?m)^a"));
    }

    #[test]
    fn an_anchored_pattern_sees_the_unwrapped_command_whole() {
        let d = Denylist::compile(&["^rm$".to_string()]).unwrap();
        assert_eq!(d.check(&argv("sudo rm")), Some("^rm$"));
        assert_eq!(d.check(&argv("sudo rm -f")), None);
    }

    #[test]
    fn bad_and_empty_patterns_are_named() {
        let err = Denylist::compile(&["(unclosed".to_string()])
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("denylist_patterns: \"(unclosed\" is not a valid regex"),
            "{err}"
        );
        assert!(Denylist::compile(&[String::new()]).is_err());
    }

    #[test]
    fn oversized_patterns_are_refused() {
        let huge = "(?:\\w{100}){100}".to_string();
        let err = Denylist::compile(&[huge]).unwrap_err().to_string();
        assert!(err.contains("is not a valid regex"), "{err}");
    }

    #[test]
    fn unwrapping_is_bounded_by_the_words() {
        let line = "env A=1 ".repeat(500) + "shutdown";
        assert_eq!(seed().check(&argv(&line)), Some(r"(?i)^(\S*/)?shutdown\b"));
    }
}
