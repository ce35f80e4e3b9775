//! `sed`: regex (or literal) replacement, line by line, across files.
//!
//! Security meaning: every file is resolved and checked by the guard before
//! any is edited, so one path that escapes, is missing or is denylisted
//! fails the whole request with nothing written. A file is then edited only
//! if it is a regular file (a symlink operand is skipped, since replacing it
//! would replace the link), read through an fd on exactly the inode that was
//! checked and within the size cap, and rewritten through a [`Temp`] that
//! keeps its mode.
#![forbid(unsafe_code)]

use super::channel::{abandoned, Channel};
use super::grep::{is_binary, REGEX_SIZE_LIMIT};
use super::guard::Guard;
use super::read::{read_at, reopen_for_reading};
use super::temp::Temp;
use super::Beneath;
use ide_proto::{
    operand_error, ErrorKind, ExecutorError, FsReply, RootedPath, SedEdit, SedOutcome,
};
use regex::{NoExpand, Regex, RegexBuilder};
use rustix::fs::FileType;

/// The compiled edit.
pub struct Edit {
    regex: Regex,
    replacement: String,
    expand: bool,
    limit: usize,
}

impl Edit {
    /// Compiles `edit`; a bad pattern is `BadRegex`.
    pub fn new(edit: &SedEdit) -> Result<Edit, ExecutorError> {
        let source = if edit.regex {
            edit.pattern.clone()
        } else {
            regex::escape(&edit.pattern)
        };
        let regex = RegexBuilder::new(&source)
            .case_insensitive(edit.ignore_case)
            .size_limit(REGEX_SIZE_LIMIT)
            .dfa_size_limit(REGEX_SIZE_LIMIT)
            .build()
            .map_err(|e| ExecutorError::new(ErrorKind::BadRegex, format!("invalid regex: {e}")))?;
        Ok(Edit {
            regex,
            replacement: edit.replacement.clone(),
            expand: edit.regex,
            limit: usize::from(edit.first_only),
        })
    }

    /// Replaces in each line (terminators kept, never matched across) and
    /// counts the replacements.
    pub fn apply(&self, text: &str) -> (String, u64) {
        let mut out = String::with_capacity(text.len());
        let mut count = 0u64;
        for line in text.split_inclusive('\n') {
            let body = line.strip_suffix('\n').unwrap_or(line);
            let body = body.strip_suffix('\r').unwrap_or(body);
            let end = &line[body.len()..];
            let found = self.regex.find_iter(body).count();
            let found = if self.limit == 0 {
                found
            } else {
                found.min(self.limit)
            };
            count += found as u64;
            if found == 0 {
                out.push_str(line);
                continue;
            }
            let replaced = if self.expand {
                self.regex
                    .replacen(body, self.limit, self.replacement.as_str())
            } else {
                self.regex
                    .replacen(body, self.limit, NoExpand(&self.replacement))
            };
            out.push_str(&replaced);
            out.push_str(end);
        }
        (out, count)
    }
}

/// `sed`: one outcome per file, in order.
pub fn sed(
    at: &Beneath<'_>,
    guard: &Guard,
    files: &[RootedPath],
    edit: &SedEdit,
    max_file_bytes: u64,
    io: &mut dyn Channel,
) -> Result<FsReply, ExecutorError> {
    let edit = Edit::new(edit)?;
    for (index, file) in files.iter().enumerate() {
        let leaf = at.leaf(file).map_err(|e| operand_error(index, e))?;
        guard.check(&leaf.fd).map_err(|e| operand_error(index, e))?;
    }
    let mut outcomes = Vec::with_capacity(files.len());
    for file in files {
        if io.cancelled() {
            return Err(abandoned());
        }
        let outcome = match edit_one(at, guard, file, &edit, max_file_bytes) {
            Ok(replacements) => SedOutcome {
                replacements,
                error: None,
            },
            Err(e) => SedOutcome {
                replacements: 0,
                error: Some(e.message),
            },
        };
        outcomes.push(outcome);
    }
    Ok(FsReply::Sed { outcomes })
}

fn skipped(why: &str) -> ExecutorError {
    ExecutorError::new(ErrorKind::Invalid, why)
}

fn edit_one(
    at: &Beneath<'_>,
    guard: &Guard,
    path: &RootedPath,
    edit: &Edit,
    max_file_bytes: u64,
) -> Result<u64, ExecutorError> {
    let leaf = at.leaf(path)?;
    guard.check(&leaf.fd)?;
    match FileType::from_raw_mode(leaf.stat.st_mode) {
        FileType::RegularFile => {}
        FileType::Symlink => {
            return Err(skipped(
                "skipped: a symlink operand (editing would replace the link)",
            ))
        }
        _ => return Err(skipped("skipped: not a regular file")),
    }
    let Some((dir, name)) = leaf.parent.as_ref() else {
        return Err(skipped("skipped: not a regular file"));
    };
    let size = u64::try_from(leaf.stat.st_size).unwrap_or(0);
    if size > max_file_bytes {
        return Err(skipped(&format!(
            "skipped: {size} bytes is over the {max_file_bytes}-byte limit"
        )));
    }
    let file = reopen_for_reading(&leaf.fd)?;
    if is_binary(&file)? {
        return Err(skipped("skipped: binary file"));
    }
    let mut bytes = vec![0u8; usize::try_from(size).unwrap_or(0)];
    let mut filled = 0;
    while filled < bytes.len() {
        let n = read_at(&file, &mut bytes[filled..], filled as u64)?;
        if n == 0 {
            break;
        }
        filled += n;
    }
    bytes.truncate(filled);
    let text = String::from_utf8(bytes).map_err(|_| skipped("skipped: not UTF-8 text"))?;
    let (edited, count) = edit.apply(&text);
    if count > 0 {
        let mut temp = Temp::create(dir, name)?;
        temp.write(edited.as_bytes())?;
        temp.commit(name, leaf.stat.st_mode & 0o7777, true)?;
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(pattern: &str, replacement: &str, regex: bool, first_only: bool) -> Edit {
        Edit::new(&SedEdit {
            pattern: pattern.into(),
            replacement: replacement.into(),
            regex,
            first_only,
            ignore_case: false,
        })
        .unwrap()
    }

    #[test]
    fn replacements_are_per_line_and_keep_terminators() {
        let e = edit("o", "0", true, false);
        assert_eq!(e.apply("foo\r\nboo\nx"), ("f00\r\nb00\nx".into(), 4));
        let e = edit("o", "0", true, true);
        assert_eq!(e.apply("foo\nboo\n"), ("f0o\nb0o\n".into(), 2));
        let e = edit("a\nb", "x", false, false);
        assert_eq!(e.apply("a\nb\n"), ("a\nb\n".into(), 0));
    }

    #[test]
    fn regex_mode_expands_groups_and_literal_mode_does_not() {
        let e = edit(r"(\w+)@(?P<host>\w+)", "${host}:$1", true, false);
        assert_eq!(e.apply("me@box\n"), ("box:me\n".into(), 1));
        let e = edit("a.b", "$1", false, false);
        assert_eq!(e.apply("a.b axb\n"), ("$1 axb\n".into(), 1));
    }

    #[test]
    fn bad_patterns_are_bad_regex() {
        let err = Edit::new(&SedEdit {
            pattern: "(".into(),
            replacement: String::new(),
            regex: true,
            first_only: false,
            ignore_case: false,
        })
        .err()
        .unwrap();
        assert_eq!(err.kind, ErrorKind::BadRegex);
        let huge = format!("{}{{1000}}", "\\w");
        let err = Edit::new(&SedEdit {
            pattern: format!("({huge}){{100}}"),
            replacement: String::new(),
            regex: true,
            first_only: false,
            ignore_case: true,
        })
        .err()
        .unwrap();
        assert_eq!(err.kind, ErrorKind::BadRegex);
    }
}
