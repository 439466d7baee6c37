//! The model behind the proxy: an OpenAI-compatible base URL (`…/v1`) and how requests to it are
//! authorised.

use std::time::Duration;

use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use reqwest::{Client, Response, Url};

use crate::ApiError;
use crate::proxy::ProxyError;

/// How a forwarded request is authorised upstream.
#[derive(Debug, Clone)]
pub(crate) enum UpstreamAuth {
    /// The operator's key for the upstream (`--upstream-key`).
    Key(String),
    /// The caller's own `Authorization` header, forwarded as sent: only on a proxy without API
    /// keys, where that header carries no aril key.
    Caller,
    /// Nothing (a local model server).
    None,
}

/// An OpenAI-compatible model server.
pub(crate) struct Upstream {
    client: Client,
    /// The base URL, ending in `/` so that `chat/completions` joins under it.
    base: Url,
    auth: UpstreamAuth,
}

/// How long connecting to the upstream may take (a reply itself may take as long as it takes).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

impl Upstream {
    pub fn new(base: &str, auth: UpstreamAuth) -> Result<Self, ProxyError> {
        let mut base = Url::parse(base).map_err(|e| ProxyError::Upstream {
            url: base.to_string(),
            reason: e.to_string(),
        })?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(ProxyError::Upstream {
                url: base.to_string(),
                reason: "it is not an http(s) URL".into(),
            });
        }
        if !base.path().ends_with('/') {
            base.set_path(&format!("{}/", base.path()));
        }
        let client = Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true)
            .build()
            .map_err(|e| ProxyError::Client(e.to_string()))?;
        Ok(Self { client, base, auth })
    }

    /// Where the upstream lives, for the startup line.
    pub fn base(&self) -> &Url {
        &self.base
    }

    fn url(&self, path: &str) -> Result<Url, ApiError> {
        self.base
            .join(path)
            .map_err(|e| ApiError::internal(format!("the upstream URL for {path}: {e}")))
    }

    fn authorised(
        &self,
        request: reqwest::RequestBuilder,
        caller: &HeaderMap,
    ) -> reqwest::RequestBuilder {
        match &self.auth {
            UpstreamAuth::Key(key) => request.bearer_auth(key),
            UpstreamAuth::Caller => match caller.get(AUTHORIZATION) {
                Some(value) => request.header(AUTHORIZATION, value.clone()),
                None => request,
            },
            UpstreamAuth::None => request,
        }
    }

    /// POSTs a JSON body to `path` under the base URL.
    pub async fn post(
        &self,
        path: &str,
        body: &serde_json::Value,
        caller: &HeaderMap,
    ) -> Result<Response, ApiError> {
        let request = self.client.post(self.url(path)?).json(body);
        self.send(path, self.authorised(request, caller)).await
    }

    /// GETs `path` under the base URL.
    pub async fn get(&self, path: &str, caller: &HeaderMap) -> Result<Response, ApiError> {
        let request = self.client.get(self.url(path)?);
        self.send(path, self.authorised(request, caller)).await
    }

    async fn send(
        &self,
        path: &str,
        request: reqwest::RequestBuilder,
    ) -> Result<Response, ApiError> {
        request.send().await.map_err(|e| {
            ApiError::new(
                axum::http::StatusCode::BAD_GATEWAY,
                "upstream_unreachable",
                format!(
                    "the upstream model at {} did not answer {path}: {e}; check `aril proxy \
                     --upstream`",
                    self.base
                ),
            )
        })
    }
}
