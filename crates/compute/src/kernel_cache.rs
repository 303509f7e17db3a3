//! Where the GPU backends keep what they learn about this machine between processes: burn's
//! autotune choice per kernel and shape, and the compiled kernels (cubecl's persistent cache,
//! burn's `persistence` feature, compiled into lsr's GPU builds). Without it every process (each
//! cell of a matrix run as its own Slurm task, the GPU check's warm-up and measured runs) tunes
//! and compiles again in its first steps.
//!
//! lsr keeps one cache per user and machine: `$LSR_KERNEL_CACHE`, else
//! `$XDG_CACHE_HOME/lsr/kernels`, else `~/.cache/lsr/kernels`; `LSR_KERNEL_CACHE=off` keeps
//! everything in memory. cubecl's own default is `target/environment` of the outermost Cargo
//! workspace above the working directory, else `~/.cache/cubecl`: another cache for each place
//! a command starts from. Entries are keyed by device and kernel, so one directory serves
//! several GPUs, and cubecl's database takes several processes at once: every cell of a
//! matrix, in one process or one per task, shares it.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The environment variable that places (or turns off) the cache.
pub const VARIABLE: &str = "LSR_KERNEL_CACHE";

/// Where tuning results and compiled kernels are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelCache {
    /// In memory only: every process tunes and compiles again.
    Off,
    Directory(PathBuf),
}

impl KernelCache {
    /// The setting `LSR_KERNEL_CACHE` and the user's directories give.
    pub fn from_env() -> Self {
        let var = |name| std::env::var(name).ok().filter(|v| !v.is_empty());
        Self::resolve(var(VARIABLE), var("XDG_CACHE_HOME"), var("HOME"))
    }

    fn resolve(setting: Option<String>, xdg_cache: Option<String>, home: Option<String>) -> Self {
        match setting.as_deref() {
            Some("off") => Self::Off,
            Some(dir) => Self::Directory(PathBuf::from(dir)),
            None => {
                let cache_home = xdg_cache
                    .map(PathBuf::from)
                    .or_else(|| home.map(|home| Path::new(&home).join(".cache")))
                    .unwrap_or_else(std::env::temp_dir);
                Self::Directory(cache_home.join("lsr").join("kernels"))
            }
        }
    }
}

impl std::fmt::Display for KernelCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Off => write!(
                f,
                "off ({VARIABLE}=off): tuned and compiled in each process"
            ),
            Self::Directory(dir) => write!(f, "{}", dir.display()),
        }
    }
}

/// Hands cubecl lsr's cache setting, once per process, before a GPU backend reads its
/// configuration (which it does once, when the first device starts). What a `cubecl.toml`
/// found from the working directory up sets is kept, but for the cache's place when the file
/// leaves cubecl's default, and for the compiled-kernel cache, which lsr turns on (cubecl's
/// default keeps only the autotune choices).
pub fn configure() -> &'static KernelCache {
    static CONFIGURED: OnceLock<KernelCache> = OnceLock::new();
    CONFIGURED.get_or_init(|| {
        let cache = KernelCache::from_env();
        hand_to_cubecl(&cache);
        cache
    })
}

#[cfg(any(feature = "cuda", feature = "wgpu"))]
fn hand_to_cubecl(cache: &KernelCache) {
    use cubecl_runtime::config::cache::CacheConfig;
    use cubecl_runtime::config::{CubeClRuntimeConfig, RuntimeConfig};

    let mut config = CubeClRuntimeConfig::from_current_dir().override_from_env();
    match cache {
        KernelCache::Off => {
            config.autotune.disable_cache = true;
            config.compilation.cache = false;
        }
        KernelCache::Directory(dir) => {
            if matches!(config.environment.path, CacheConfig::Target) {
                config.environment.path = CacheConfig::Directory(dir.clone());
            }
            config.compilation.cache = true;
        }
    }
    let root = config.environment.path.root();
    if CubeClRuntimeConfig::try_set(config) {
        tracing::info!("kernel cache: {}", describe(cache, &root));
    } else {
        tracing::warn!(
            "kernel cache: cubecl read its configuration before lsr could set it; {cache} is not used"
        );
    }
}

#[cfg(not(any(feature = "cuda", feature = "wgpu")))]
fn hand_to_cubecl(_: &KernelCache) {}

#[cfg(any(feature = "cuda", feature = "wgpu"))]
fn describe(cache: &KernelCache, root: &Path) -> String {
    match cache {
        KernelCache::Directory(dir) if dir != root => {
            format!(
                "{} (a cubecl.toml places it; {VARIABLE} is not used)",
                root.display()
            )
        }
        _ => cache.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(setting: Option<&str>, xdg: Option<&str>, home: Option<&str>) -> KernelCache {
        let own = |v: Option<&str>| v.map(str::to_string);
        KernelCache::resolve(own(setting), own(xdg), own(home))
    }

    #[test]
    fn the_cache_is_the_variables_directory_else_the_users_cache_else_a_temporary_one() {
        let dir = |p: &str| KernelCache::Directory(PathBuf::from(p));
        assert_eq!(
            resolve(Some("/scratch/k"), Some("/x"), Some("/h")),
            dir("/scratch/k")
        );
        assert_eq!(resolve(None, Some("/x"), Some("/h")), dir("/x/lsr/kernels"));
        assert_eq!(
            resolve(None, None, Some("/h")),
            dir("/h/.cache/lsr/kernels")
        );
        assert_eq!(
            resolve(None, None, None),
            KernelCache::Directory(std::env::temp_dir().join("lsr/kernels"))
        );
        assert_eq!(
            resolve(Some("off"), Some("/x"), Some("/h")),
            KernelCache::Off
        );
    }
}
