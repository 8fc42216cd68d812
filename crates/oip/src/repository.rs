//! The model repository in Triton's layout: `MODEL/config.pbtxt` (optional), `MODEL/N/model.so`
//! (the highest version `N` is served, Triton's default `latest` policy), weights or a `params`
//! file beside it as the Triton backend takes them. Or one model file served alone, named after
//! the file. Each model is loaded on its own: one that fails is listed with its reason while
//! the others serve; models are loaded, reloaded and unloaded while the server runs (Triton's
//! model repository extension).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;
use serde_json::{json, Value};

use crate::error::ApiError;
use crate::model::{Defaults, ServedModel};

/// Where the models come from.
#[derive(Clone, Debug)]
pub enum Source {
    /// A directory of model directories.
    Directory(PathBuf),
    /// One model file, served as the model named after it.
    File(PathBuf),
}

/// A model's state.
enum Entry {
    Ready(Arc<ServedModel>),
    Unavailable { version: String, reason: String },
}

/// The models, by name.
pub struct Repository {
    source: Source,
    defaults: Defaults,
    models: RwLock<BTreeMap<String, Entry>>,
    /// One load or unload at a time.
    control: tokio::sync::Mutex<()>,
}

/// The served version of model directory `dir`: its highest numbered subdirectory.
fn latest_version(dir: &Path) -> Result<String, String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("reading `{}`: {e}", dir.display()))?;
    entries
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().to_str()?.parse::<u64>().ok())
        .max()
        .map(|v| v.to_string())
        .ok_or_else(|| {
            format!(
                "`{}` has no version directory (`1/model.so`, Triton's layout)",
                dir.display()
            )
        })
}

/// Model `dir`'s configuration: its `config.pbtxt` as JSON, or `{}`.
fn read_config(dir: &Path) -> Result<Value, String> {
    let path = dir.join("config.pbtxt");
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            tvmrt_models::pbtxt::parse(&text).map_err(|e| format!("`{}`: {e}", path.display()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(json!({})),
        Err(e) => Err(format!("reading `{}`: {e}", path.display())),
    }
}

impl Repository {
    /// A repository of `source`'s models; nothing loaded yet.
    pub fn new(source: Source, defaults: Defaults) -> Repository {
        Repository {
            source,
            defaults,
            models: RwLock::new(BTreeMap::new()),
            control: tokio::sync::Mutex::new(()),
        }
    }

    /// The names of the models the source holds now.
    pub fn names(&self) -> Vec<String> {
        match &self.source {
            Source::File(f) => vec![single_name(f)],
            Source::Directory(d) => {
                let mut names: Vec<String> = std::fs::read_dir(d)
                    .into_iter()
                    .flatten()
                    .filter_map(Result::ok)
                    .filter(|e| e.path().is_dir() && !is_mlc_model(&e.path()))
                    .filter_map(|e| e.file_name().to_str().map(str::to_string))
                    .filter(|n| !n.starts_with('.'))
                    .collect();
                names.sort();
                names
            }
        }
    }

    /// Loads model `name` (blocking) with `config` in place of its `config.pbtxt` if given:
    /// its version and the served model, or why not.
    fn load_blocking(
        &self,
        name: &str,
        config: Option<Value>,
    ) -> (String, Result<ServedModel, String>) {
        let (version, dir, config) = match &self.source {
            Source::File(f) => {
                let file = f.file_name().map(|n| n.to_string_lossy().into_owned());
                let dir = f
                    .parent()
                    .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
                let dir = if dir.as_os_str().is_empty() {
                    PathBuf::from(".")
                } else {
                    dir
                };
                let mut config = config.unwrap_or_else(|| json!({}));
                if config.get("default_model_filename").is_none() {
                    config["default_model_filename"] = json!(file);
                }
                ("1".to_string(), dir, Ok(config))
            }
            Source::Directory(root) => {
                let dir = root.join(name);
                if is_mlc_model(&dir) {
                    return (
                        "1".into(),
                        Err(format!(
                        "model `{name}`: an MLC-LLM model directory (mlc-chat-config.json): serve \
                         it on its own with `tvmrt serve {} --model-lib LIB` (OpenAI's API)",
                        dir.display()
                    )),
                    );
                }
                match latest_version(&dir) {
                    Ok(v) => {
                        let config = config.map_or_else(|| read_config(&dir), Ok);
                        (v.clone(), dir.join(&v), config)
                    }
                    Err(e) => return ("1".into(), Err(format!("model `{name}`: {e}"))),
                }
            }
        };
        let loaded = config
            .map_err(|e| format!("model `{name}`: {e}"))
            .and_then(|c| ServedModel::load(name, &version, &dir, c, &self.defaults));
        (version, loaded)
    }

    /// Loads (or reloads) model `name`, with `config` in place of its `config.pbtxt` if given
    /// (a load request's override). A reload that fails leaves the version served before in
    /// place.
    pub async fn load(self: &Arc<Self>, name: &str, config: Option<Value>) -> Result<(), ApiError> {
        let _control = self.control.lock().await;
        if !self.names().iter().any(|n| n == name) {
            return Err(ApiError::bad_request(format!(
                "failed to load '{name}', failed to poll from model repository: no model `{name}` in it"
            )));
        }
        let me = self.clone();
        let owned = name.to_string();
        let (version, loaded) =
            tokio::task::spawn_blocking(move || me.load_blocking(&owned, config))
                .await
                .unwrap_or_else(|e| ("1".into(), Err(format!("loading panicked: {e}"))));
        match loaded {
            Ok(model) => {
                crate::log_info!("successfully loaded '{name}' version {version}");
                let old = self
                    .models
                    .write()
                    .insert(name.to_string(), Entry::Ready(Arc::new(model)));
                if let Some(Entry::Ready(old)) = old {
                    stop_in_background(old).await;
                }
                Ok(())
            }
            Err(reason) => {
                crate::log_error!("{reason}");
                let mut models = self.models.write();
                if !matches!(models.get(name), Some(Entry::Ready(_))) {
                    models.insert(
                        name.to_string(),
                        Entry::Unavailable {
                            version,
                            reason: reason.clone(),
                        },
                    );
                }
                Err(ApiError::bad_request(format!(
                    "failed to load '{name}': {reason}"
                )))
            }
        }
    }

    /// Loads every model of the source, several at once.
    pub async fn load_all(self: &Arc<Self>) {
        let mut tasks = tokio::task::JoinSet::new();
        for name in self.names() {
            let me = self.clone();
            tasks.spawn(async move {
                let _ = me.load(&name, None).await;
            });
        }
        while tasks.join_next().await.is_some() {}
    }

    /// Unloads model `name`: new requests are refused, those queued and running finish.
    pub async fn unload(&self, name: &str) -> Result<(), ApiError> {
        let _control = self.control.lock().await;
        let old = {
            let mut models = self.models.write();
            let Some(entry) = models.get_mut(name) else {
                return Err(ApiError::bad_request(format!(
                    "failed to unload '{name}': the model is not loaded"
                )));
            };
            let version = match entry {
                Entry::Ready(m) => m.version.clone(),
                Entry::Unavailable { version, .. } => version.clone(),
            };
            std::mem::replace(
                entry,
                Entry::Unavailable {
                    version,
                    reason: "unloaded".into(),
                },
            )
        };
        if let Entry::Ready(m) = old {
            let version = m.version.clone();
            stop_in_background(m).await;
            crate::log_info!("successfully unloaded '{name}' version {version}");
        }
        Ok(())
    }

    /// Unloads every model (at shutdown), each finishing its requests.
    pub async fn unload_all(&self) {
        let names: Vec<String> = self.models.read().keys().cloned().collect();
        for name in names {
            let _ = self.unload(&name).await;
        }
    }

    /// The ready model `name` (and `version`, if given).
    pub fn get(&self, name: &str, version: Option<&str>) -> Result<Arc<ServedModel>, ApiError> {
        match self.models.read().get(name) {
            None => Err(ApiError::unknown_model(name)),
            Some(Entry::Unavailable { reason, .. }) => Err(ApiError::unavailable(format!(
                "Request for unknown model: '{name}' has no available versions ({reason})"
            ))),
            Some(Entry::Ready(m)) => match version {
                Some(v) if !v.is_empty() && v != m.version => Err(ApiError::not_found(format!(
                    "Request for unknown model: '{name}' version {v} is not found"
                ))),
                _ => Ok(m.clone()),
            },
        }
    }

    /// Every ready model.
    pub fn ready(&self) -> Vec<Arc<ServedModel>> {
        self.models
            .read()
            .values()
            .filter_map(|e| match e {
                Entry::Ready(m) => Some(m.clone()),
                Entry::Unavailable { .. } => None,
            })
            .collect()
    }

    /// The repository index (`POST /v2/repository/index`): every model of the source with
    /// its state (`READY`, or `UNAVAILABLE` and the reason); `ready_only` lists the ready ones.
    pub fn index(&self, ready_only: bool) -> Value {
        let models = self.models.read();
        let mut list = Vec::new();
        for name in self.names().into_iter().chain(models.keys().cloned()) {
            if list.iter().any(|v: &Value| v["name"] == name.as_str()) {
                continue;
            }
            let item = match models.get(&name) {
                Some(Entry::Ready(m)) => {
                    json!({"name": name, "version": m.version, "state": "READY"})
                }
                Some(Entry::Unavailable { version, reason }) if !ready_only => {
                    json!({"name": name, "version": version, "state": "UNAVAILABLE", "reason": reason})
                }
                None if !ready_only => json!({"name": name}),
                _ => continue,
            };
            list.push(item);
        }
        Value::Array(list)
    }
}

/// An MLC-LLM model directory (it holds `mlc-chat-config.json`): served on OpenAI's routes by
/// the LLM server, not as a tensor model.
pub fn is_mlc_model(dir: &Path) -> bool {
    dir.join("mlc-chat-config.json").is_file()
}

/// The MLC-LLM model directories of repository `root`.
pub fn mlc_models(root: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir() && is_mlc_model(p))
        .collect();
    dirs.sort();
    dirs
}

/// A single model file's name: the file's stem (`resnet.so` is `resnet`).
pub fn single_name(file: &Path) -> String {
    file.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".into())
}

/// Stops `model` off the async threads, waiting for its requests to finish.
async fn stop_in_background(model: Arc<ServedModel>) {
    let _ = tokio::task::spawn_blocking(move || model.stop()).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tvmrt_oip_{name}_{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn the_highest_numbered_version_is_served() {
        let d = scratch("versions");
        for v in ["1", "3", "10", "notes", ".9"] {
            std::fs::create_dir_all(d.join("m").join(v)).unwrap();
        }
        assert_eq!(latest_version(&d.join("m")).unwrap(), "10");
        std::fs::create_dir_all(d.join("empty")).unwrap();
        let e = latest_version(&d.join("empty")).unwrap_err();
        assert!(
            e.ends_with("has no version directory (`1/model.so`, Triton's layout)"),
            "{e}"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn models_are_listed_and_what_cannot_load_says_why() {
        let d = scratch("listing");
        for m in ["b", "a", ".hidden", "llm", "noversion"] {
            std::fs::create_dir_all(d.join(m)).unwrap();
        }
        std::fs::write(d.join("llm/mlc-chat-config.json"), "{}").unwrap();
        std::fs::create_dir_all(d.join("a/1")).unwrap();
        std::fs::write(d.join("a/config.pbtxt"), "max_batch_sise: 2\n").unwrap();
        let repo = Repository::new(Source::Directory(d.clone()), Defaults { max_queue: 4 });
        assert_eq!(repo.names(), vec!["a", "b", "noversion"]);
        assert_eq!(mlc_models(&d), vec![d.join("llm")]);
        let why = |m: &str| repo.load_blocking(m, None).1.err().unwrap();
        assert!(
            why("llm").contains("an MLC-LLM model directory"),
            "{}",
            why("llm")
        );
        assert!(
            why("a").contains("unknown field `max_batch_sise`"),
            "{}",
            why("a")
        );
        assert!(why("noversion").contains("has no version directory"));
        assert_eq!(repo.index(false)[0], json!({"name": "a"}));
        assert_eq!(repo.index(true), json!([]));
        assert_eq!(
            repo.get("a", None).err().map(|e| e.status),
            Some(404.try_into().unwrap())
        );
        let single = Repository::new(Source::File(d.join("resnet.so")), Defaults { max_queue: 4 });
        assert_eq!(single.names(), vec!["resnet"]);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
