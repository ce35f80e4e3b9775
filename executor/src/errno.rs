//! Errno → failure class, in exactly one place.
//!
//! Security meaning: `Escape` (S215) is reserved for confinement escapes;
//! missing, permission denied and refused magic links all read as the same
//! `NotFound` (S211), so a denial cannot be told apart from absence. Messages
//! never carry a resolved host path: the broker re-words them with the
//! caller's own string.
#![forbid(unsafe_code)]

use ide_proto::{ErrorKind, ExecutorError};
use rustix::io::Errno;

/// The class of a failed path syscall.
pub fn kind_of(errno: Errno) -> ErrorKind {
    match errno {
        Errno::XDEV => ErrorKind::Escape,
        Errno::LOOP | Errno::NOENT | Errno::ACCESS | Errno::PERM => ErrorKind::NotFound,
        Errno::NOTDIR | Errno::ISDIR => ErrorKind::WrongType,
        Errno::EXIST => ErrorKind::Exists,
        Errno::NOTEMPTY => ErrorKind::NotEmpty,
        Errno::NAMETOOLONG | Errno::INVAL => ErrorKind::Invalid,
        _ => ErrorKind::Internal,
    }
}

/// The error for a failed path syscall, worded by its class.
pub fn path_error(errno: Errno) -> ExecutorError {
    let kind = kind_of(errno);
    let message = match kind {
        ErrorKind::Escape => "path escapes its root".to_owned(),
        ErrorKind::NotFound => "not found or not accessible".to_owned(),
        ErrorKind::WrongType if errno == Errno::ISDIR => "is a directory".to_owned(),
        ErrorKind::WrongType => "not a directory".to_owned(),
        ErrorKind::Exists => "already exists".to_owned(),
        ErrorKind::NotEmpty => "directory not empty".to_owned(),
        ErrorKind::Invalid => format!("invalid path: {errno}"),
        _ => format!("i/o error: {errno}"),
    };
    ExecutorError::new(kind, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_exdev_is_an_escape() {
        let all = [
            Errno::XDEV,
            Errno::LOOP,
            Errno::NOENT,
            Errno::ACCESS,
            Errno::PERM,
            Errno::NOTDIR,
            Errno::ISDIR,
            Errno::EXIST,
            Errno::NOTEMPTY,
            Errno::NAMETOOLONG,
            Errno::INVAL,
            Errno::IO,
            Errno::AGAIN,
        ];
        let escapes: Vec<_> = all
            .iter()
            .filter(|e| kind_of(**e) == ErrorKind::Escape)
            .collect();
        assert_eq!(escapes, [&Errno::XDEV]);
    }

    #[test]
    fn denied_and_missing_read_the_same() {
        let missing = path_error(Errno::NOENT);
        for errno in [Errno::ACCESS, Errno::PERM, Errno::LOOP] {
            assert_eq!(path_error(errno), missing);
        }
    }

    #[test]
    fn classes_follow_the_table() {
        assert_eq!(kind_of(Errno::NOTDIR), ErrorKind::WrongType);
        assert_eq!(kind_of(Errno::ISDIR), ErrorKind::WrongType);
        assert_eq!(kind_of(Errno::EXIST), ErrorKind::Exists);
        assert_eq!(kind_of(Errno::NOTEMPTY), ErrorKind::NotEmpty);
        assert_eq!(kind_of(Errno::NAMETOOLONG), ErrorKind::Invalid);
        assert_eq!(kind_of(Errno::IO), ErrorKind::Internal);
    }
}
