//! Encoding a segment into cards: label mapping, supersession, state, and rejection of cards that
//! cite turns outside the segment — with scripted replies at the `ChatModel` seam (fault
//! injection), and once with a real model (`llama-server` + SmolLM2 from `scripts/fetch-llm`).

use aril_cards::{EncodeConfig, EncoderState, RecentCard, encode_segment};
use aril_core::{CardId, CardKind, CloseReason, NewTurn, Role, Scope, Segment, SegmentId, Turn};
use aril_llm::{LlmError, LocalServer, Purpose, Scripted};
use chrono::{TimeZone, Utc};
use serde_json::json;

fn segment() -> (Segment, Vec<Turn>) {
    let lines = [
        (
            "Caroline",
            "Hey Mel! I went to the LGBTQ support group yesterday.",
        ),
        ("Melanie", "That's great, how was it?"),
        ("Caroline", "Really powerful. My sis Ana came with me."),
    ];
    let turns: Vec<Turn> = lines
        .iter()
        .enumerate()
        .map(|(i, (speaker, text))| {
            let t = NewTurn {
                scope: Scope::user("conv-1").unwrap(),
                conversation: "conv-1".into(),
                session: Some("s1".into()),
                role: Role::User,
                speaker: Some(speaker.to_string()),
                text: text.to_string(),
                event_time: Some(
                    Utc.with_ymd_and_hms(2023, 5, 8, 13, 56 + i as u32, 0)
                        .unwrap(),
                ),
                source_id: Some(format!("D1:{}", i + 1)),
                metadata: None,
                lifecycle: Default::default(),
            };
            Turn {
                id: t.id(),
                seq: i as i64,
                turn: t,
                ingest_time: Utc::now(),
            }
        })
        .collect();
    let ids: Vec<_> = turns.iter().map(|t| t.id.clone()).collect();
    let segment = Segment {
        id: SegmentId::for_turns(&ids),
        scope: Scope::user("conv-1").unwrap(),
        conversation: "conv-1".into(),
        turns: ids,
        boundary_score: 0.8,
        reason: CloseReason::TopicShift,
        tokens: 40,
        start_time: turns[0].turn.event_time,
        end_time: turns[2].turn.event_time,
    };
    (segment, turns)
}

fn recent() -> Vec<RecentCard> {
    vec![RecentCard {
        id: CardId("c_old".into()),
        kind: CardKind::Fact,
        text: "Caroline has never been to a support group.".into(),
    }]
}

fn card(turns: &[&str], supersedes: &[&str]) -> serde_json::Value {
    json!({
        "type": "event",
        "text": "Caroline went to an LGBTQ support group on 2023-05-07, with her sister Ana.",
        "entities": ["Caroline", "Ana"],
        "topics": ["support group"],
        "time": {"start": "2023-05-07", "end": null, "granularity": "day"},
        "source_turns": turns,
        "supersedes": supersedes
    })
}

fn reply(cards: Vec<serde_json::Value>) -> serde_json::Value {
    json!({
        "cards": cards,
        "state": {"aliases": [{"alias": "sis", "name": "Ana"}], "open_references": []}
    })
}

#[test]
fn labels_map_back_to_turn_and_card_ids_and_the_state_carries_over() {
    let (segment, turns) = segment();
    let model = Scripted::new(vec![reply(vec![card(&["T1", "T3"], &["C1"])])]);
    let before = EncoderState {
        aliases: vec![("Mel".into(), "Melanie".into())],
        open_references: vec![],
    };
    let out = encode_segment(
        &model,
        &segment,
        &turns,
        &before,
        &recent(),
        &EncodeConfig::default(),
    )
    .unwrap();
    assert_eq!(out.calls, 1);
    let c = &out.cards[0];
    assert_eq!(c.kind, CardKind::Event);
    assert_eq!(
        c.source_turns,
        vec![turns[0].id.clone(), turns[2].id.clone()]
    );
    assert_eq!(c.supersedes, vec![CardId("c_old".into())]);
    assert_eq!(c.segment, segment.id);
    assert_eq!(
        c.time
            .as_ref()
            .and_then(|t| t.start)
            .map(|t| t.to_rfc3339()),
        Some("2023-05-07T00:00:00+00:00".into())
    );
    assert!(c.id.0.starts_with("c_"));
    assert_eq!(
        out.state.aliases,
        vec![
            ("Mel".into(), "Melanie".into()),
            ("sis".into(), "Ana".into())
        ]
    );
    // The prompt showed the turns with their absolute times, the state and the recent card.
    let asked = model.asked();
    let prompt = &asked[0].messages[1].content;
    assert!(
        prompt.contains("T1 [2023-05-08 13:56] Caroline: Hey Mel!"),
        "{prompt}"
    );
    assert!(
        prompt.contains("\"Mel\" means Melanie") && prompt.contains("C1 [fact]"),
        "{prompt}"
    );
}

/// The ablation switches live in the configuration: without state budgets the prompt carries no
/// state and no recent card; with `summaries` one summary card cites the whole segment.
#[test]
fn ablations_drop_the_cross_segment_context_or_write_one_summary() {
    let (segment, turns) = segment();
    let before = EncoderState {
        aliases: vec![("Mel".into(), "Melanie".into())],
        open_references: vec![],
    };
    let stateless = EncodeConfig {
        state_budget: 0,
        recent_budget: 0,
        ..EncodeConfig::default()
    };
    let model = Scripted::new(vec![reply(vec![card(&["T1"], &[])])]);
    encode_segment(&model, &segment, &turns, &before, &recent(), &stateless).unwrap();
    let prompt = &model.asked()[0].messages[1].content;
    assert!(
        !prompt.contains("\"Mel\" means") && !prompt.contains("C1 ["),
        "{prompt}"
    );

    let summaries = EncodeConfig {
        summaries: true,
        ..EncodeConfig::default()
    };
    let model = Scripted::new(vec![
        json!({"summary": "  "}),
        json!({"summary": "Caroline told Melanie about the support group on 7 May 2023."}),
    ]);
    let out = encode_segment(&model, &segment, &turns, &before, &recent(), &summaries).unwrap();
    assert_eq!(out.calls, 2, "an empty summary is repaired once");
    assert_eq!(out.cards.len(), 1);
    let c = &out.cards[0];
    assert_eq!(c.kind, CardKind::Fact);
    assert_eq!(c.source_turns, segment.turns);
    assert!(c.entities.is_empty() && c.time.is_none());
    assert_eq!(out.state, before);
}

#[test]
fn a_card_citing_a_turn_outside_the_segment_is_repaired_once() {
    let (segment, turns) = segment();
    let model = Scripted::new(vec![
        reply(vec![card(&["T9"], &[])]),
        reply(vec![card(&["T2"], &[])]),
    ]);
    let out = encode_segment(
        &model,
        &segment,
        &turns,
        &EncoderState::default(),
        &[],
        &EncodeConfig::default(),
    )
    .unwrap();
    assert_eq!(out.calls, 2);
    assert_eq!(out.cards[0].source_turns, vec![turns[1].id.clone()]);
    let asked = model.asked();
    let repair = &asked[1].messages.last().unwrap().content;
    // Caught by the schema (the labels are enumerated) or, for a server that does not enforce
    // it, by the check; either way the model is told which label is wrong.
    assert!(repair.contains("\"T9\""), "{repair}");
}

#[test]
fn a_reply_that_stays_bad_fails_with_the_reason_and_no_cards() {
    let (segment, turns) = segment();
    let mut bad_date = card(&["T1"], &[]);
    bad_date["time"] = json!({"start": "2023-02-30", "end": null, "granularity": "day"});
    let model = Scripted::new(vec![
        reply(vec![card(&["T1"], &["C7"])]),
        reply(vec![bad_date]),
    ]);
    match encode_segment(
        &model,
        &segment,
        &turns,
        &EncoderState::default(),
        &recent(),
        &EncodeConfig::default(),
    ) {
        Err(LlmError::InvalidReply { reason }) => {
            assert!(reason.contains("bad start date"), "{reason}")
        }
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[test]
fn turns_that_do_not_match_the_segment_are_refused_before_any_call() {
    let (segment, turns) = segment();
    let model = Scripted::new(vec![]);
    let err = encode_segment(
        &model,
        &segment,
        &turns[..2],
        &EncoderState::default(),
        &[],
        &EncodeConfig::default(),
    );
    assert!(matches!(err, Err(LlmError::Config(_))));
    assert!(model.asked().is_empty());
}

#[test]
fn a_real_model_writes_cards_that_cite_only_the_segments_turns() {
    let server = LocalServer::from_cache().unwrap_or_else(|e| panic!("{e}"));
    let client = server.client().unwrap();
    let (segment, turns) = segment();
    let config = EncodeConfig {
        max_cards: 2,
        max_tokens: 1500,
        ..Default::default()
    };
    let out = encode_segment(
        &client,
        &segment,
        &turns,
        &EncoderState::default(),
        &recent(),
        &config,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.cards.len() <= 2);
    for c in &out.cards {
        assert!(!c.text.is_empty());
        assert!(
            !c.source_turns.is_empty() && c.source_turns.iter().all(|t| segment.turns.contains(t)),
            "{c:?}"
        );
        assert!(c.supersedes.iter().all(|s| s.0 == "c_old"));
    }
    let calls = client.ledger().calls();
    assert_eq!(calls.len() as u32, out.calls);
    assert!(
        calls
            .iter()
            .all(|c| c.purpose == Purpose::Encode && c.prompt_tokens > 100)
    );
}
