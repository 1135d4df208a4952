//! A TCP proxy in front of the API server that a test can cut: the host behind it goes blind
//! (its connections are closed, new ones refused) while the test still talks to the API server
//! directly, so objects can change unseen — what a partition or an API server restart does.

use anyhow::{anyhow, Result};
use std::io::Read;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The proxy; it stops accepting when dropped.
pub struct Proxy {
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    cut: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
    stop: Arc<AtomicBool>,
}

impl Proxy {
    /// Listens on a free port and forwards to `upstream`.
    pub fn start(upstream: SocketAddr) -> Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let (cut, open, stop) =
            (Arc::new(AtomicBool::new(false)), Arc::new(Mutex::new(Vec::new())), Arc::new(AtomicBool::new(false)));
        let (c, o, s) = (cut.clone(), open.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(down) = conn else { continue };
                if c.load(Ordering::Relaxed) {
                    let _ = down.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(up) = TcpStream::connect(upstream) else {
                    let _ = down.shutdown(Shutdown::Both);
                    continue;
                };
                if let (Ok(d2), Ok(u2)) = (down.try_clone(), up.try_clone()) {
                    let mut open = o.lock().unwrap_or_else(|e| e.into_inner());
                    open.push(d2);
                    open.push(u2);
                }
                pipe(&down, &up);
                pipe(&up, &down);
            }
        });
        Ok(Proxy { port, cut, open, stop })
    }

    /// Closes every connection and refuses new ones until [`Proxy::restore`].
    pub fn cut(&self) {
        self.cut.store(true, Ordering::Relaxed);
        for s in self.open.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    /// Forwards again.
    pub fn restore(&self) {
        self.cut.store(false, Ordering::Relaxed);
    }

    /// A copy of `kubeconfig` whose clusters point at this proxy, written to `out`.
    pub fn kubeconfig(&self, kubeconfig: &Path, out: PathBuf) -> Result<PathBuf> {
        let mut kc: serde_yaml::Value = serde_yaml::from_str(&std::fs::read_to_string(kubeconfig)?)?;
        let clusters =
            kc.get_mut("clusters").and_then(|c| c.as_sequence_mut()).ok_or_else(|| anyhow!("no clusters"))?;
        for c in clusters.iter_mut() {
            if let Some(m) = c.get_mut("cluster").and_then(|c| c.as_mapping_mut()) {
                m.insert("server".into(), format!("https://127.0.0.1:{}", self.port).into());
            }
        }
        std::fs::write(&out, serde_yaml::to_string(&kc)?)?;
        Ok(out)
    }

    /// The API server address in `kubeconfig` (its first cluster's server).
    pub fn upstream_of(kubeconfig: &Path) -> Result<SocketAddr> {
        let kc: serde_yaml::Value = serde_yaml::from_str(&std::fs::read_to_string(kubeconfig)?)?;
        let server = kc["clusters"][0]["cluster"]["server"].as_str().ok_or_else(|| anyhow!("no server"))?;
        let hostport = server.trim_start_matches("https://").trim_end_matches('/');
        Ok(hostport.parse()?)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.cut();
        let _ = TcpStream::connect(("127.0.0.1", self.port)); // wakes the accept loop
    }
}

fn pipe(from: &TcpStream, to: &TcpStream) {
    let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else { return };
    std::thread::spawn(move || {
        let mut buf = [0u8; 16 << 10];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if std::io::Write::write_all(&mut to, &buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to.shutdown(Shutdown::Both);
        let _ = from.shutdown(Shutdown::Both);
    });
}
