//! Adopting the broker's socket inherited as `--fd N`.
//!
//! Security meaning: `SO_PEERCRED` on a socketpair names only its creator, so
//! it proves nothing here; instead the fd itself must be what the contract
//! says — an `AF_UNIX` stream socket — before a single byte is read from it.
//! It is marked close-on-exec so no command ever inherits the broker link.
#![forbid(unsafe_code)]

use crate::sys;
use rustix::fd::{AsFd, RawFd};
use rustix::io::{fcntl_setfd, FdFlags};
use rustix::net::sockopt::{socket_domain, socket_type};
use rustix::net::{AddressFamily, SocketType};
use std::io;
use tokio::net::UnixStream;

/// Refuses anything but an `AF_UNIX` `SOCK_STREAM` socket.
pub fn check_unix_stream(fd: impl AsFd) -> io::Result<()> {
    let refuse = |what: &str| Err(io::Error::new(io::ErrorKind::InvalidInput, what.to_owned()));
    if socket_domain(&fd)? != AddressFamily::UNIX {
        return refuse("the broker fd is not an AF_UNIX socket");
    }
    if socket_type(&fd)? != SocketType::STREAM {
        return refuse("the broker fd is not a stream socket");
    }
    Ok(())
}

/// Takes inherited fd `fd`, checks it and makes it an async stream.
pub fn adopt(fd: RawFd) -> io::Result<UnixStream> {
    let owned = sys::adopt_inherited_fd(fd)?;
    check_unix_stream(&owned)?;
    fcntl_setfd(&owned, FdFlags::CLOEXEC)?;
    let stream = std::os::unix::net::UnixStream::from(owned);
    stream.set_nonblocking(true)?;
    UnixStream::from_std(stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unix_stream_passes() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        check_unix_stream(&a).unwrap();
    }

    #[test]
    fn other_sockets_and_files_are_refused() {
        let (dgram, _other) = std::os::unix::net::UnixDatagram::pair().unwrap();
        assert!(check_unix_stream(&dgram).is_err());
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        assert!(check_unix_stream(&tcp).is_err());
        let file = tempfile::tempfile().unwrap();
        assert!(check_unix_stream(&file).is_err());
    }

    #[tokio::test]
    async fn adopting_a_pair_end_gives_a_cloexec_stream() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        fcntl_setfd(&a, FdFlags::empty()).unwrap();
        let raw = std::os::fd::IntoRawFd::into_raw_fd(a);
        let stream = adopt(raw).unwrap();
        assert!(rustix::io::fcntl_getfd(&stream)
            .unwrap()
            .contains(FdFlags::CLOEXEC));
    }

    #[tokio::test]
    async fn adopting_a_datagram_socket_fails() {
        let (a, _b) = std::os::unix::net::UnixDatagram::pair().unwrap();
        let raw = std::os::fd::IntoRawFd::into_raw_fd(a);
        assert!(adopt(raw).is_err());
    }
}
