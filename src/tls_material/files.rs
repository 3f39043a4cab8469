//! Certificate files on disk: their names, and two ways of writing them so that a reader never
//! sees half of a change and a private key is never readable by others, not even for a moment.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{Context as _, bail};

/// The file names (and the keys of the self-managed Secret): the CA, put into the webhook
/// configurations' `caBundle`, and the serving pair.
pub const CA_CRT: &str = "ca.crt";
pub const CA_KEY: &str = "ca.key";
pub const TLS_CRT: &str = "tls.crt";
pub const TLS_KEY: &str = "tls.key";

/// Where the four files of a certificate folder live.
#[derive(Debug, Clone)]
pub struct CertPaths {
    pub ca_cert: PathBuf,
    pub ca_key: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl CertPaths {
    pub fn in_dir(dir: &Path) -> Self {
        CertPaths {
            ca_cert: dir.join(CA_CRT),
            ca_key: dir.join(CA_KEY),
            cert: dir.join(TLS_CRT),
            key: dir.join(TLS_KEY),
        }
    }
}

/// Create `path`, which must not exist yet, with permission bits `mode` from the start: a private
/// key is never readable by others, not even between a write and a chmod, and a file or symlink
/// someone planted at the path is an error instead of being written through.
pub fn create_new_with_mode(path: &Path, mode: u32) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new().write(true).create_new(true).mode(mode).open(path)
}

/// Replace one file through a temporary file and a rename, so a server polling the folder never
/// reads half a file. Private keys are created readable by the owner only.
pub fn replace_file(path: &Path, contents: &[u8], private: bool) -> anyhow::Result<()> {
    let Some(dir) = path.parent() else { bail!("{} has no parent folder", path.display()) };
    let tmp =
        dir.join(format!(".{}.tmp", path.file_name().map_or_else(Default::default, |n| n.to_string_lossy())));
    // A leftover temporary file (an earlier run killed mid-write) would keep its old mode if
    // opened again: remove it so the file is created, with its mode, from the start.
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(e).with_context(|| format!("removing {}", tmp.display()));
        }
        _ => {}
    }
    let mode = if private { 0o600 } else { 0o644 };
    let mut file = create_new_with_mode(&tmp, mode).with_context(|| format!("creating {}", tmp.display()))?;
    file.write_all(contents).with_context(|| format!("writing {}", tmp.display()))?;
    file.sync_all().with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
}

/// Write `files` into `dir` the way Kubernetes updates a Secret volume: into a fresh hidden folder,
/// then one atomic rename of the `..data` symlink, so a reader never sees a certificate next to
/// another certificate's key. `dir/<name>` are symlinks into `..data`. Returns false (and writes
/// nothing) when the files already have this content.
pub fn write_files(dir: &Path, files: &[(&str, &[u8])]) -> std::io::Result<bool> {
    use std::os::unix::fs::symlink;
    std::fs::create_dir_all(dir)?;
    if files.iter().all(|(name, content)| std::fs::read(dir.join(name)).is_ok_and(|c| c == *content)) {
        return Ok(false);
    }
    let stamp = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let data_name = format!("..{stamp}");
    let data_dir = dir.join(&data_name);
    std::fs::create_dir(&data_dir)?;
    for (name, content) in files {
        let mut file = create_new_with_mode(&data_dir.join(name), 0o600)?;
        file.write_all(content)?;
        file.sync_all()?;
    }
    let previous = std::fs::read_link(dir.join("..data")).ok();
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    symlink(&data_name, &tmp)?;
    std::fs::rename(&tmp, dir.join("..data"))?;
    for (name, _) in files {
        let link = dir.join(name);
        match std::fs::symlink_metadata(&link) {
            Ok(meta) if meta.file_type().is_symlink() => continue,
            // A plain file from another writer: replace it with the link.
            Ok(_) => std::fs::remove_file(&link)?,
            Err(_) => {}
        }
        symlink(Path::new("..data").join(name), &link)?;
    }
    if let Some(previous) = previous
        && previous != Path::new(&data_name)
    {
        let _ = std::fs::remove_dir_all(dir.join(previous));
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A watcher polling the folder while keys are written never sees a key file readable by
    /// anyone but the owner (write-then-chmod would leave a window with the umask's 0644).
    #[test]
    fn key_files_are_owner_only_from_their_creation() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let watcher = {
            let (dir, done) = (dir.path().to_owned(), done.clone());
            std::thread::spawn(move || {
                let (mut seen, mut open_modes) = (0, Vec::new());
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                        let Ok(meta) = std::fs::metadata(entry.path().join(TLS_KEY)) else { continue };
                        seen += 1;
                        let mode = meta.permissions().mode() & 0o777;
                        if mode != 0o600 {
                            open_modes.push(mode);
                        }
                    }
                }
                (seen, open_modes)
            })
        };
        let key = vec![b'k'; 256 * 1024];
        for i in 0..150u32 {
            let mut content = key.clone();
            content[..4].copy_from_slice(&i.to_be_bytes());
            write_files(dir.path(), &[(TLS_CRT, b"c"), (TLS_KEY, &content)]).unwrap();
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        let (seen, open_modes) = watcher.join().unwrap();
        assert!(seen > 0, "the watcher never saw a key file");
        assert!(
            open_modes.is_empty(),
            "key files seen with modes {open_modes:?} (decimal; {} of {seen} looks)",
            open_modes.len()
        );
    }

    #[test]
    fn files_are_swapped_atomically_and_only_when_changed() {
        let dir = tempfile::tempdir().unwrap();
        assert!(write_files(dir.path(), &[("tls.crt", b"a"), ("tls.key", b"b")]).unwrap());
        assert!(!write_files(dir.path(), &[("tls.crt", b"a"), ("tls.key", b"b")]).unwrap());
        assert!(write_files(dir.path(), &[("tls.crt", b"c"), ("tls.key", b"d")]).unwrap());
        assert_eq!(std::fs::read(dir.path().join("tls.crt")).unwrap(), b"c");
        assert!(std::fs::symlink_metadata(dir.path().join("tls.key")).unwrap().file_type().is_symlink());
        // Only the current data folder is left.
        let hidden = std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with(".."))
            .count();
        assert_eq!(hidden, 2, "..data and one data folder");
    }
}
