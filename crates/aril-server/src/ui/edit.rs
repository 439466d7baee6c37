//! One memory's page (its versions, an update form) and the deletions: a memory, a session or a
//! whole user. Each deletion first shows a confirmation that names what goes, then runs the same
//! purge as the API (`DELETE /v1/memories/{id}/`, `DELETE /v1/scopes`; a session's memories go
//! through the memories' purge, as `aril delete --conversation C --session S` does).

use aril_engine::{Grant, MemoryEdit};
use axum::extract::{Form, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use maud::html;
use serde::Deserialize;

use super::page::{link, page, when};
use super::{UiError, Viewer};
use crate::{ApiError, AppState};

#[derive(Deserialize)]
pub(crate) struct MemoryQuery {
    id: String,
    done: Option<String>,
}

/// A memory: what it says now and every version.
pub(crate) async fn memory(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(q): Query<MemoryQuery>,
) -> Result<Response, UiError> {
    let now = crate::memory::memory_by_id(&state, &viewer.caller, q.id.clone()).await?;
    let versions = crate::memory::history(&state, &viewer.caller, q.id.clone()).await?;
    let user = now.user_id.clone();
    Ok(page(
        "Memory",
        &viewer,
        Some(&user),
        html! {
            @if let Some(done) = &q.done { p.done { (done) } }
            h1 { "Memory " code { (now.id) } }
            p.lead {
                "of " (user)
                @if let Some(role) = now.role { " · said by the " (role.as_str()) }
                " · first " (when(Some(now.created_at))) " · updated " (when(Some(now.updated_at)))
                @if now.valid_to.is_some() { " · no longer holds from " (when(now.valid_to)) }
            }
            blockquote.current { (now.memory) }
            h2 { "Versions" }
            table {
                thead { tr { th { "#" } th { "event" } th { "text" } th { "holds" } th { "stored" } } }
                tbody {
                    @for v in &versions {
                        tr {
                            td.num { (v.version) }
                            td { (v.event) }
                            td { (v.new_memory) }
                            td { (when(Some(v.valid_from))) " – " (when(v.valid_to)) }
                            td { (when(Some(v.updated_at))) }
                        }
                    }
                }
            }
            h2 { "Update" }
            p.muted { "Writes a new version; the old ones stay in the history." }
            form.update method="post" action="/ui/memory" {
                input type="hidden" name="id" value=(now.id);
                textarea name="text" rows="3" required { (now.memory) }
                button type="submit" { "Save a new version" }
            }
            p.actions {
                a.danger href=(link("/ui/delete", &[("id", &now.id)])) { "Delete this memory…" }
            }
        },
    )
    .into_response())
}

#[derive(Deserialize)]
pub(crate) struct UpdateForm {
    id: String,
    text: String,
}

/// Writes the memory's next version (the API's update) and shows the memory again.
pub(crate) async fn update(
    State(state): State<AppState>,
    viewer: Viewer,
    Form(form): Form<UpdateForm>,
) -> Result<Response, UiError> {
    if form.text.trim().is_empty() {
        return Err(UiError(ApiError::bad_request(
            "the new text is empty: write what the memory should say, or delete it",
        )));
    }
    let edit = MemoryEdit {
        text: Some(form.text),
        metadata: None,
        expires_at: None,
        valid_to: None,
        at: None,
    };
    let now = crate::memory::update_memory(&state, &viewer.caller, form.id, edit).await?;
    Ok(Redirect::to(&link(
        "/ui/memory",
        &[("id", &now.id), ("done", "Saved a new version.")],
    ))
    .into_response())
}

#[derive(Deserialize)]
pub(crate) struct DeleteQuery {
    id: String,
}

/// The confirmation of a memory's deletion: its text and how many versions go.
pub(crate) async fn confirm_delete(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(q): Query<DeleteQuery>,
) -> Result<Response, UiError> {
    let now = crate::memory::memory_by_id(&state, &viewer.caller, q.id.clone()).await?;
    let versions = crate::memory::history(&state, &viewer.caller, q.id).await?;
    let user = now.user_id.clone();
    Ok(page(
        "Delete a memory",
        &viewer,
        Some(&user),
        html! {
            h1 { "Delete this memory?" }
            blockquote.current { (now.memory) }
            p {
                "This deletes the memory " code { (now.id) } " of " (user) " with all "
                (versions.len()) " of its versions, from the store, the indexes and the vector
                cache. The segment that held it keeps its other turns. It cannot be undone."
            }
            form method="post" action="/ui/delete" {
                input type="hidden" name="id" value=(now.id);
                button.danger type="submit" { "Delete it" }
                " "
                a href=(link("/ui/memory", &[("id", &now.id)])) { "Keep it" }
            }
        },
    )
    .into_response())
}

#[derive(Deserialize)]
pub(crate) struct DeleteForm {
    id: String,
}

/// Deletes the memory (the API's purge) and returns to its user's timeline.
pub(crate) async fn delete(
    State(state): State<AppState>,
    viewer: Viewer,
    Form(form): Form<DeleteForm>,
) -> Result<Response, UiError> {
    let user = crate::memory::memory_by_id(&state, &viewer.caller, form.id.clone())
        .await?
        .user_id;
    let gone = crate::memory::delete_memory(&state, &viewer.caller, form.id.clone()).await?;
    let done = format!(
        "Deleted memory {} ({} version(s)).",
        form.id,
        gone.versions()
    );
    Ok(Redirect::to(&link("/ui/user", &[("u", &user), ("done", &done)])).into_response())
}

#[derive(Deserialize)]
pub(crate) struct UserQuery {
    u: Option<String>,
}

/// The confirmation of a user's deletion, with the counts that go.
pub(crate) async fn confirm_delete_user(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(q): Query<UserQuery>,
) -> Result<Response, UiError> {
    let filter = viewer.scope(q.u)?;
    let user = filter.user_id.clone();
    let about = state
        .read(move |engine| engine.scope_summary(&filter))
        .await?;
    Ok(page(
        "Delete a user",
        &viewer,
        Some(&user),
        html! {
            h1 { "Delete everything of " (user) "?" }
            p {
                "This deletes " (about.turns) " turns, " (about.segments) " segments and every card ("
                (about.current_cards) " current) of " (user) ", with their index entries and cached vectors,
                from every file. It cannot be undone."
            }
            form method="post" action="/ui/delete-user" {
                input type="hidden" name="u" value=(user);
                button.danger type="submit" { "Delete " (user) }
                " "
                a href=(link("/ui/user", &[("u", &user)])) { "Keep it" }
            }
        },
    )
    .into_response())
}

/// Deletes the user's whole memory (the API's scope deletion).
pub(crate) async fn delete_user(
    State(state): State<AppState>,
    viewer: Viewer,
    Form(q): Form<UserQuery>,
) -> Result<Response, UiError> {
    let filter = viewer.scope(q.u)?;
    let user = filter.user_id.clone();
    let gone = state.run(move |engine| engine.delete(&filter)).await?;
    let done = format!(
        "Deleted {user}: {} turns, {} segments.",
        gone.turns, gone.segments
    );
    let to = match viewer.caller.grant {
        Grant::Admin => link("/ui", &[("done", &done)]),
        Grant::User(_) => link("/ui/user", &[("u", &user), ("done", &done)]),
    };
    Ok(Redirect::to(&to).into_response())
}

#[derive(Deserialize)]
pub(crate) struct SessionQuery {
    u: Option<String>,
    /// The conversation.
    c: String,
    /// The session; absent for the conversation's turns that name none.
    s: Option<String>,
}

/// How many turns the confirmation quotes.
const QUOTED: usize = 5;

/// The confirmation of a session's deletion: how many turns go, when they were said, the first
/// few of them.
pub(crate) async fn confirm_delete_session(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(q): Query<SessionQuery>,
) -> Result<Response, UiError> {
    let filter = viewer.scope(q.u.clone())?;
    let user = filter.user_id.clone();
    let (conversation, session) = (q.c.clone(), q.s.clone());
    let turns = state
        .read(move |engine| {
            let ids = engine.session_memories(&filter, &conversation, session.as_deref())?;
            let found = engine.turns_by_id(&ids)?;
            Ok::<_, aril_engine::EngineError>(
                ids.iter()
                    .filter_map(|id| found.get(id).cloned())
                    .collect::<Vec<_>>(),
            )
        })
        .await?;
    let said = |t: &aril_core::Turn| t.turn.event_time.unwrap_or(t.ingest_time);
    let first = turns.iter().map(said).min();
    let last = turns.iter().map(said).max();
    let name = session_name(&q.c, q.s.as_deref());
    Ok(page(
        "Delete a session",
        &viewer,
        Some(&user),
        html! {
            h1 { "Delete " (name) "?" }
            p {
                "This deletes " (turns.len()) " turns of " (user) ", said from " (when(first))
                " to " (when(last)) " (every memory said in this session, with all its versions),
                from the store, the indexes and the vector cache. The segments that held them keep
                their other turns; the cards written from those segments go with them. It cannot
                be undone."
            }
            @for t in turns.iter().take(QUOTED) {
                blockquote { (t.turn.speaker.as_deref().unwrap_or(t.turn.role.as_str())) ": " (t.turn.text) }
            }
            @if turns.len() > QUOTED { p.muted { "… and " (turns.len() - QUOTED) " more." } }
            form method="post" action="/ui/delete-session" {
                input type="hidden" name="u" value=(user);
                input type="hidden" name="c" value=(q.c);
                @if let Some(s) = &q.s { input type="hidden" name="s" value=(s); }
                button.danger type="submit" { "Delete the session" }
                " "
                a href=(link("/ui/user", &[("u", &user)])) { "Keep it" }
            }
        },
    )
    .into_response())
}

/// Deletes the session (each of its memories through the API's purge) and returns to the
/// timeline.
pub(crate) async fn delete_session(
    State(state): State<AppState>,
    viewer: Viewer,
    Form(q): Form<SessionQuery>,
) -> Result<Response, UiError> {
    let filter = viewer.scope(q.u)?;
    let user = filter.user_id.clone();
    let (conversation, session) = (q.c.clone(), q.s.clone());
    let gone = state
        .run(move |engine| engine.delete_session(&filter, &conversation, session.as_deref()))
        .await?;
    let done = format!(
        "Deleted {}: {} turns.",
        session_name(&q.c, q.s.as_deref()),
        gone.turns
    );
    Ok(Redirect::to(&link("/ui/user", &[("u", &user), ("done", &done)])).into_response())
}

/// `session "s2" of conversation "demo"`, or `the turns of conversation "demo" without a session`.
fn session_name(conversation: &str, session: Option<&str>) -> String {
    match session {
        Some(s) => format!("session {s:?} of conversation {conversation:?}"),
        None => format!("the turns of conversation {conversation:?} without a session"),
    }
}
