//! The MCP protocol side of `agentlog mcp` (rmcp's `ServerHandler`):
//! `tools/list` and `tools/call`, `resources/list`, `resources/templates/list`,
//! `resources/read`, `resources/subscribe` and `resources/unsubscribe`.
//!
//! Every store command runs on tokio's blocking pool (the store and the
//! daemon client block), so a waiting read never holds up other requests
//! of the session. A refused command is a tool result with `isError` and
//! the CLI's message; only a request the server cannot route (an unknown
//! resource URI, an internal failure) is a protocol error. Each tool call
//! first renews the heartbeats of the agents the session registered
//! (the seed's rule for transport-attached agents).

use super::backend::{Backend, Outcome};
use super::resources::{self, Subscriptions, Target};
use super::session::Session;
use super::tools::{self, Request};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, ResourceContents,
    ResourceUpdatedNotificationParam, ServerCapabilities, ServerConfig, SubscribeRequestParams,
    UnsubscribeRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::json;
use std::sync::Arc;

/// One MCP session's server: the store it serves, the session's agents,
/// and the resource subscriptions.
pub struct Server {
    pub backend: Arc<Backend>,
    pub session: Arc<Session>,
    pub subscriptions: Arc<Subscriptions>,
}

const INSTRUCTIONS: &str = "agentlog: an event-sourced registry of coding agents. \
    Call `register` once with your agent name and provider: the agent is then attached to \
    this session (every tool call renews its heartbeat; when the session ends it goes idle). \
    `post` messages to other agents, `read` yours (with `wait` to block until mail arrives), \
    `list`, `show`, `audit` and `replay` the registry. Resources: agentlog://agents, \
    agentlog://agents/{name}, agentlog://agents/{name}/audit (subscribable).";

impl Server {
    /// `f` on the blocking pool.
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Backend) -> T + Send + 'static,
    ) -> Result<T, McpError> {
        let backend = Arc::clone(&self.backend);
        tokio::task::spawn_blocking(move || f(&backend))
            .await
            .map_err(|e| McpError::internal_error(format!("a store call failed: {e}"), None))
    }
}

/// A refused tool call: `isError` with the message.
fn refused(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_resources_subscribe()
                .build(),
        )
        .with_server_info(Implementation::new("agentlog", env!("CARGO_PKG_VERSION")))
        .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tools::all()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let who = self.session.identity(&context.peer);
        let call = match tools::decode(&request.name, request.arguments, &who) {
            Ok(call) => call,
            Err(message) => return Ok(refused(message).into()),
        };
        let renew = self.session.agents_except(call.renews.as_deref());
        let pid = who.host_pid;
        let outcome = match call.request {
            Request::Command { method, params } => {
                self.blocking(move |b| {
                    Session::renew(b, &renew, pid);
                    b.call(method, &params)
                })
                .await?
            }
            Request::WaitingRead { params, wait } => {
                let cancel = self.session.waiting_read();
                let waiting = Arc::clone(&cancel);
                let backend = Arc::clone(&self.backend);
                let mut task = tokio::task::spawn_blocking(move || {
                    Session::renew(&backend, &renew, pid);
                    backend.read_waiting(&params, wait, &waiting)
                });
                let joined = tokio::select! {
                    r = &mut task => r,
                    () = context.ct.cancelled() => {
                        cancel.cancel();
                        task.await
                    }
                };
                self.session.read_done(&cancel);
                joined.map_err(|e| McpError::internal_error(format!("a read failed: {e}"), None))?
            }
        };
        Ok(match outcome {
            Outcome::Done(doc) => {
                if let Some(name) = call.registers {
                    self.session.joined(name);
                }
                CallToolResult::structured(doc)
            }
            Outcome::Refused(message) => refused(message),
            Outcome::Cancelled => refused("cancelled by the client: nothing was read".into()),
        }
        .into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        Ok(ListResourcesResult::with_all_items(resources::listed()))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(
            resources::templates(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let uri = request.uri;
        let target = Target::parse(&uri).ok_or_else(|| unknown(&uri))?;
        let text = self
            .blocking(move |b| resources::read(b, &target))
            .await?
            .map_err(|message| {
                McpError::resource_not_found(message, Some(json!({"uri": uri.clone()})))
            })?;
        let contents = ResourceContents::text(text, uri).with_mime_type("application/json");
        Ok(ReadResourceResult::new(vec![contents]).into())
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let uri = request.uri;
        Target::parse(&uri).ok_or_else(|| unknown(&uri))?;
        let peer = context.peer.clone();
        let runtime = tokio::runtime::Handle::current();
        let subscriptions = Arc::clone(&self.subscriptions);
        // The first subscription starts the follower and the task that
        // sends its updates to this client.
        let updates = move || {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
            runtime.spawn(async move {
                while let Some(uri) = rx.recv().await {
                    let param = ResourceUpdatedNotificationParam::new(uri);
                    if peer.notify_resource_updated(param).await.is_err() {
                        break; // the client is gone
                    }
                }
            });
            tx
        };
        self.blocking(move |_| subscriptions.subscribe(uri, updates))
            .await?
            .map_err(|message| McpError::internal_error(message, None))
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.subscriptions.unsubscribe(&request.uri);
        Ok(())
    }
}

/// A URI this server has no resource for.
fn unknown(uri: &str) -> McpError {
    McpError::resource_not_found(
        format!(
            "no resource `{uri}`: the resources are agentlog://agents, \
             agentlog://agents/{{name}} and agentlog://agents/{{name}}/audit"
        ),
        Some(json!({"uri": uri})),
    )
}
