//! The planned read path end to end on a real embedder and tantivy, over each store backend (SQLite
//! and a scratch PostgreSQL database, the same test code), with scripted encoder,
//! planner and answerer replies at the model seam (their content is what is being steered here);
//! `engine.rs` runs the same path with the real local model.

use std::sync::atomic::AtomicBool;

mod common;

use aril_engine::llm::{LlmError, Reranker, Scripted};
use aril_engine::{
    AskRequest, ConsolidateOptions, Engine, EngineError, IngestOptions, NewTurn, Role, Scope,
    ScopeFilter, UnitKind,
};
use chrono::{SubsecRound, TimeZone, Utc};
use common::Place;
use serde_json::json;

const LINES: [(&str, &str); 8] = [
    ("s1", "I adopted a beagle called Pimenta from the shelter."),
    (
        "s1",
        "Beagles love long walks; Pimenta will enjoy the park.",
    ),
    ("s1", "She howls when I leave the flat."),
    ("s1", "Try short departures and a puzzle feeder."),
    ("s2", "I signed up for the Lisbon marathon in October."),
    (
        "s2",
        "Build your weekly distance slowly, about ten percent a week.",
    ),
    ("s2", "My knee hurts after long runs."),
    (
        "s2",
        "Outer knee pain is often the iliotibial band; rest and strengthen your hips.",
    ),
];

fn turns(user: &str) -> Vec<NewTurn> {
    LINES
        .iter()
        .enumerate()
        .map(|(n, (session, text))| NewTurn {
            scope: Scope::user(user).unwrap(),
            conversation: "c1".into(),
            session: Some(session.to_string()),
            role: if n % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            },
            speaker: None,
            text: text.to_string(),
            // Session 2 is a week after session 1.
            event_time: Some(
                Utc.with_ymd_and_hms(2024, 3, if n < 4 { 1 } else { 8 }, 10, n as u32, 0)
                    .unwrap(),
            ),
            source_id: Some(format!("{session}:{n}")),
            metadata: None,
            lifecycle: Default::default(),
        })
        .collect()
}

/// An engine with the conversation ingested and every segment written into one card that cites
/// the segment's first turn.
fn engine_with_cards(place: &Place) -> (Engine, usize) {
    engine_with_dog_card(place, "fact", "T1")
}

/// As [`engine_with_cards`], with the dog's card of type `dog_kind` citing the turn `dog_cites`.
fn engine_with_dog_card(place: &Place, dog_kind: &str, dog_cites: &str) -> (Engine, usize) {
    let mut engine = place.open();
    engine
        .ingest(
            turns("u"),
            &IngestOptions {
                flush: true,
                ..Default::default()
            },
            &mut |_| {},
            &AtomicBool::new(false),
        )
        .unwrap();
    let (segments, _) = engine
        .segments(&ScopeFilter::user("u"), 0, u64::MAX)
        .unwrap();
    let replies = segments
        .iter()
        .map(|s| {
            let first = engine.turns(&s.turns[..1]).unwrap().remove(0);
            let dog = first.turn.text.contains("beagle");
            json!({"cards": [{
                "type": if dog { dog_kind } else { "event" },
                "text": format!("Card: {}", first.turn.text),
                "entities": if dog { vec!["Pimenta"] } else { vec!["Lisbon marathon"] },
                "topics": if dog { vec!["pets"] } else { vec!["running"] },
                "time": {"start": first.turn.event_time.unwrap().format("%Y-%m-%d").to_string(),
                         "end": null, "granularity": "day"},
                "source_turns": [if dog { dog_cites } else { "T1" }],
                "supersedes": []
            }], "state": {"aliases": [], "open_references": []}})
        })
        .collect();
    let encoder = Scripted::new(replies);
    let report = engine
        .consolidate(
            &encoder,
            &ConsolidateOptions::default(),
            &mut |_| {},
            &AtomicBool::new(false),
        )
        .unwrap();
    assert_eq!(report.segments_done, segments.len(), "{report:?}");
    (engine, segments.len())
}

aril_store::conformance!(
    planned_paths_find_cards_with_their_source_turns_and_each_path_keeps_a_share,
    the_single_list_ablation_recalls_cards_from_one_list_only,
    a_reranker_reorders_each_path_and_a_failing_one_is_reported_not_hidden,
    preference_cards_form_the_profile_and_get_a_list_of_their_own,
    facts_the_user_said_are_stable_traits_and_facts_from_the_assistant_are_not,
    an_unusable_plan_or_no_planner_searches_the_question_and_says_so,
    a_plan_that_searches_elsewhere_still_finds_what_the_question_finds,
    ask_answers_from_the_context_and_an_empty_answer_is_an_error,
    deleted_cards_are_never_recalled,
    a_turn_the_prompt_already_holds_is_not_recalled_again,
    a_forgotten_card_leaves_the_profile_and_recall_when_its_time_comes,
);

fn request(question: &str) -> AskRequest {
    AskRequest {
        filter: ScopeFilter::user("u"),
        question: question.into(),
        asked_at: Some(Utc.with_ymd_and_hms(2024, 3, 10, 12, 0, 0).unwrap()),
        k: Some(6),
        budget: Some(400),
        single_list: false,
        known_texts: Vec::new(),
    }
}

fn two_paths() -> Scripted {
    Scripted::new(vec![json!({"paths": [
        {"goal": "the dog", "query": "beagle howls", "entities": ["Pimenta"], "topics": [],
         "from": null, "to": null, "units": ["cards", "turns"]},
        {"goal": "the race", "query": "knee pain marathon", "entities": [], "topics": ["running"],
         "from": "2024-03-08", "to": "2024-03-08", "units": ["cards", "turns"]}
    ]})])
}

fn planned_paths_find_cards_with_their_source_turns_and_each_path_keeps_a_share(place: &Place) {
    let (mut engine, segments) = engine_with_cards(place);
    let planner = two_paths();
    let r = engine
        .recall_planned(
            &request("How is the dog, and how is the training going?"),
            Some(&planner),
        )
        .unwrap();
    // The planner's two paths, and the question as asked for a third.
    assert_eq!(r.plan.paths.len(), 3);
    assert_eq!(
        r.plan.paths[2].query,
        "How is the dog, and how is the training going?"
    );
    assert!(r.plan_note.is_none());
    assert!(
        r.reranker.starts_with("none"),
        "the missing cross-encoder is said: {}",
        r.reranker
    );
    let dog_card = r
        .items
        .iter()
        .find(|i| i.kind == UnitKind::Card && i.text.contains("Pimenta"))
        .expect("the dog's card is recalled");
    assert_eq!(dog_card.source_turns, vec!["s1:0".to_string()]);
    assert!(
        dog_card.text.contains("said (2024-03-01): User: I adopted"),
        "{}",
        dog_card.text
    );
    assert!(dog_card.paths.contains(&1));
    assert!(
        r.items.iter().any(|i| i.paths.contains(&2)),
        "path 2 keeps a share"
    );
    // A turn a chosen card shows is not shown again.
    let card_turns: Vec<_> = r
        .items
        .iter()
        .filter(|i| i.kind == UnitKind::Card)
        .flat_map(|i| i.turns.clone())
        .collect();
    assert!(
        r.items
            .iter()
            .filter(|i| i.kind == UnitKind::Turn)
            .all(|i| !card_turns.contains(&i.turns[0]))
    );
    assert!(r.items.len() <= 6);
    assert!(r.items.iter().map(|i| i.tokens).sum::<usize>() <= 400);
    assert_eq!(
        r.items.iter().map(|i| i.rank).collect::<Vec<_>>(),
        (1..=r.items.len()).collect::<Vec<_>>()
    );
    // The context lists dated items newest first.
    let positions: Vec<(usize, chrono::DateTime<Utc>)> = r
        .items
        .iter()
        .filter_map(|i| Some((r.context.find(&i.text)?, i.time?)))
        .collect();
    let mut by_position = positions.clone();
    by_position.sort();
    assert!(
        by_position.windows(2).all(|w| w[0].1 >= w[1].1),
        "{}",
        r.context
    );
    // Every call is accounted: one per segment to encode, one to plan.
    let usage = engine.llm_usage().unwrap();
    let calls = |p: &str| {
        usage
            .iter()
            .filter(|u| u.purpose == p)
            .map(|u| u.calls)
            .sum::<u64>()
    };
    assert_eq!((calls("encode"), calls("plan")), (segments as u64, 1));
    assert_eq!(r.cost.llm_calls, 1);
}

/// The "no fusion" ablation reads the first path's dense card list alone: only cards, every one
/// credited to path 1, in the list's own order.
fn the_single_list_ablation_recalls_cards_from_one_list_only(place: &Place) {
    let (mut engine, _) = engine_with_cards(place);
    let planner = two_paths();
    let mut req = request("How is the dog, and how is the training going?");
    req.single_list = true;
    let r = engine.recall_planned(&req, Some(&planner)).unwrap();
    assert!(!r.items.is_empty());
    assert!(
        r.items.iter().all(|i| i.kind == UnitKind::Card),
        "{:?}",
        r.items
    );
    assert!(r.items.iter().all(|i| i.paths == vec![1]));
    let scores: Vec<f32> = r.items.iter().map(|i| i.score).collect();
    assert!(scores.windows(2).all(|w| w[0] > w[1]), "{scores:?}");
    // The fused recall of the same question also brings verbatim turns.
    req.single_list = false;
    let fused = engine.recall_planned(&req, Some(&two_paths())).unwrap();
    assert!(fused.items.iter().any(|i| i.kind == UnitKind::Turn));
}

/// A cross-encoder stand-in at the reranker seam (no weights exist offline): scores 1 for the
/// documents that contain a word, else 0; or fails.
struct ByWord(Option<&'static str>);

impl Reranker for ByWord {
    fn model(&self) -> &str {
        "by-word"
    }

    fn rerank(&self, _query: &str, documents: &[String]) -> Result<Vec<f32>, LlmError> {
        let word = self.0.ok_or_else(|| LlmError::Unreachable {
            url: "http://127.0.0.1:9/v1/rerank".into(),
            reason: "refused".into(),
        })?;
        Ok(documents
            .iter()
            .map(|d| f32::from(u8::from(d.contains(word))))
            .collect())
    }
}

fn a_reranker_reorders_each_path_and_a_failing_one_is_reported_not_hidden(place: &Place) {
    let (mut engine, _) = engine_with_cards(place);
    let req = request("How is my dog Pimenta?");
    let plain = engine.recall_planned(&req, None).unwrap();
    assert!(plain.items[0].text.contains("Pimenta"), "{}", plain.context);
    engine.set_reranker(Some(std::sync::Arc::new(ByWord(Some("marathon")))));
    let reranked = engine.recall_planned(&req, None).unwrap();
    assert!(
        reranked.reranker.starts_with("by-word"),
        "{}",
        reranked.reranker
    );
    assert!(
        reranked.items[0].text.contains("marathon"),
        "the cross-encoder's favourite leads: {}",
        reranked.context
    );
    // What it did is kept: the path's head in its new order, each unit with both ranks.
    assert!(
        plain.reranked.is_empty(),
        "nothing reranked without a cross-encoder"
    );
    let path = &reranked.reranked[0];
    assert_eq!(path.path, 1);
    let afters: Vec<usize> = path.units.iter().map(|u| u.after).collect();
    assert_eq!(afters, (1..=path.units.len()).collect::<Vec<_>>());
    let mut befores: Vec<usize> = path.units.iter().map(|u| u.before).collect();
    befores.sort_unstable();
    assert_eq!(befores, afters, "every unit of the head keeps a place");
    let lead = &path.units[0];
    assert_eq!(lead.score, 1.0);
    assert!(lead.before > 1, "the marathon unit moved up: {path:?}");
    assert_eq!(lead.id, reranked.items[0].id, "{path:?}");
    assert!(
        path.units
            .iter()
            .any(|u| u.score == 0.0 && u.after > u.before),
        "the dog's units moved down: {path:?}"
    );
    engine.set_reranker(Some(std::sync::Arc::new(ByWord(None))));
    let failed = engine.recall_planned(&req, None).unwrap();
    assert!(
        failed.reranker.contains("failed") && failed.reranker.contains("refused"),
        "{}",
        failed.reranker
    );
    assert_eq!(
        failed.items.iter().map(|i| &i.id).collect::<Vec<_>>(),
        plain.items.iter().map(|i| &i.id).collect::<Vec<_>>()
    );
}

fn preference_cards_form_the_profile_and_get_a_list_of_their_own(place: &Place) {
    let (mut engine, _) = engine_with_dog_card(place, "preference", "T1");
    let profile = engine.profile(&ScopeFilter::user("u")).unwrap();
    assert_eq!(profile.preferences.len(), 1, "{profile:?}");
    assert!(profile.preferences[0].text.contains("Pimenta"));
    assert!(
        profile.traits.is_empty(),
        "events are not traits: {profile:?}"
    );
    let nobody = engine.profile(&ScopeFilter::user("nobody")).unwrap();
    assert!(nobody.preferences.is_empty() && nobody.traits.is_empty());
    // The preference card is found by the dense list and again by the profile list, and leads.
    let r = engine
        .recall_planned(&request("Which dog do I like?"), None)
        .unwrap();
    assert!(r.items[0].text.contains("Pimenta"), "{}", r.context);
    assert_eq!(
        r.items[0].card_kind,
        Some(aril_engine::CardKind::Preference)
    );
}

fn facts_the_user_said_are_stable_traits_and_facts_from_the_assistant_are_not(place: &Place) {
    let (engine, _) = engine_with_dog_card(place, "fact", "T1");
    let profile = engine.profile(&ScopeFilter::user("u")).unwrap();
    assert!(profile.preferences.is_empty(), "{profile:?}");
    assert_eq!(profile.traits.len(), 1, "{profile:?}");
    assert!(profile.traits[0].text.contains("beagle"));

    drop(engine);
    let other = place.like();
    // T2 is the assistant's "Beagles love long walks…".
    let (engine, _) = engine_with_dog_card(&other, "fact", "T2");
    let profile = engine.profile(&ScopeFilter::user("u")).unwrap();
    assert!(profile.traits.is_empty(), "{profile:?}");
}

fn an_unusable_plan_or_no_planner_searches_the_question_and_says_so(place: &Place) {
    let (mut engine, _) = engine_with_cards(place);
    let nonsense = Scripted::from_texts(vec!["I think".into(), "{\"paths\": 3}".into()]);
    let r = engine
        .recall_planned(&request("Where did I adopt the beagle?"), Some(&nonsense))
        .unwrap();
    let note = r.plan_note.unwrap();
    assert!(note.contains("unusable"), "{note}");
    assert_eq!(r.cost.llm_calls, 2, "the call and its repair");
    assert!(r.items.iter().any(|i| i.text.contains("shelter")));
    let r = engine
        .recall_planned(&request("Where did I adopt the beagle?"), None)
        .unwrap();
    assert!(r.plan_note.unwrap().contains("no planner"));
    assert_eq!(r.items[0].source_turns, vec!["s1:0".to_string()]);
}

/// A valid plan whose one path looks elsewhere (what a small model writes: a date for its query,
/// cards of another day): the question as asked is searched beside it.
fn a_plan_that_searches_elsewhere_still_finds_what_the_question_finds(place: &Place) {
    let (mut engine, _) = engine_with_cards(place);
    let astray = Scripted::new(vec![json!({"paths": [
        {"goal": "2023-10-01", "query": "2023-10-01", "entities": [], "topics": [],
         "from": "2023-10-01", "to": "2023-10-01", "units": ["cards"]}
    ]})]);
    let r = engine
        .recall_planned(&request("Where did I adopt the beagle?"), Some(&astray))
        .unwrap();
    assert!(r.plan_note.is_none(), "the plan was valid");
    assert_eq!(r.plan.paths.len(), 2);
    let shelter = r
        .items
        .iter()
        .find(|i| i.text.contains("shelter"))
        .expect("the adoption is recalled");
    assert!(shelter.paths.contains(&2), "{:?}", r.items);
    // The plan's path reads cards only: every verbatim turn is the question's path's.
    let turns: Vec<_> = r
        .items
        .iter()
        .filter(|i| i.kind == UnitKind::Turn)
        .collect();
    assert!(!turns.is_empty(), "{:?}", r.items);
    assert!(turns.iter().all(|i| i.paths == vec![2]), "{turns:?}");
}

fn ask_answers_from_the_context_and_an_empty_answer_is_an_error(place: &Place) {
    let (mut engine, _) = engine_with_cards(place);
    let answerer = Scripted::from_texts(vec!["Pimenta, a beagle.".into(), "  ".into()]);
    let planner = two_paths();
    let a = engine
        .ask(
            &request("What is my dog called?"),
            Some(&planner),
            &answerer,
        )
        .unwrap();
    assert_eq!(a.answer, "Pimenta, a beagle.");
    assert_eq!(a.cost.llm_calls, 2, "one plan, one answer");
    let asked = answerer.asked();
    let prompt = &asked[0].messages;
    assert!(prompt[0].content.contains("prefer the most recent"));
    assert!(prompt[1].content.contains("Today is 2024-03-10"));
    assert!(prompt[1].content.contains(&a.recalled.context));
    let empty = engine.ask(&request("What is my dog called?"), None, &answerer);
    assert!(matches!(
        empty,
        Err(EngineError::Llm(LlmError::InvalidReply { .. }))
    ));
    let usage = engine.llm_usage().unwrap();
    assert_eq!(
        usage
            .iter()
            .filter(|u| u.purpose == "answer")
            .map(|u| u.calls)
            .sum::<u64>(),
        2,
        "the empty answer was paid for too"
    );
    assert!(matches!(
        engine.ask(&request("  "), None, &answerer),
        Err(EngineError::InvalidInput(_))
    ));
}

fn deleted_cards_are_never_recalled(place: &Place) {
    let (mut engine, _) = engine_with_cards(place);
    let before = engine.recall_planned(&request("beagle"), None).unwrap();
    assert!(before.items.iter().any(|i| i.kind == UnitKind::Card));
    let first = before
        .items
        .iter()
        .find(|i| i.kind == UnitKind::Card)
        .unwrap()
        .turns[0]
        .clone();
    engine.delete_memory(&first).unwrap();
    let after = engine.recall_planned(&request("beagle"), None).unwrap();
    assert!(
        after.items.iter().all(|i| !i.turns.contains(&first)),
        "{:?}",
        after.items
    );
    assert!(
        after
            .items
            .iter()
            .all(|i| i.kind != UnitKind::Card || !i.text.contains("Card: I adopted")),
        "the rebuilt segment's card went with it"
    );
}

/// A turn whose text the caller's prompt holds already (`known_texts`) is not recalled again; the
/// card written from it still is, and so is every other turn.
fn a_turn_the_prompt_already_holds_is_not_recalled_again(place: &Place) {
    let (engine, _) = engine_with_cards(place);
    let said = "She howls when I leave the flat.";
    let mut asked = request("Why does my dog howl?");
    let before = engine.recall_unplanned(&asked).unwrap();
    let turn_texts = |r: &aril_engine::Recalled| -> Vec<String> {
        r.items
            .iter()
            .filter(|i| i.kind == UnitKind::Turn)
            .map(|i| i.text.clone())
            .collect()
    };
    assert!(
        turn_texts(&before).iter().any(|t| t.ends_with(said)),
        "{:?}",
        before.items
    );
    asked.known_texts = vec![format!("  {said} ")];
    let after = engine.recall_unplanned(&asked).unwrap();
    assert!(
        !turn_texts(&after).iter().any(|t| t.ends_with(said)),
        "{:?}",
        after.items
    );
    assert!(
        after.items.iter().any(|i| i.kind == UnitKind::Card),
        "{:?}",
        after.items
    );
    assert!(
        !after.context.contains(&format!("User: {said}")),
        "{}",
        after.context
    );
}

/// A card memory forgotten from a time on leaves the profile and planned recall at that time
/// (even with no card written meanwhile); its history shows each version's interval, and an
/// edit closes the version it supersedes where the new text begins.
fn a_forgotten_card_leaves_the_profile_and_recall_when_its_time_comes(place: &Place) {
    let (mut engine, _) = engine_with_dog_card(place, "preference", "T1");
    let everyone = |_: &str| true;
    let profile = engine.profile(&ScopeFilter::user("u")).unwrap();
    let card = profile.preferences[0].clone();
    let said = Utc.with_ymd_and_hms(2024, 3, 1, 10, 0, 0).unwrap();
    assert_eq!(
        card.valid_from,
        Some(said),
        "holds since its source turn was said"
    );

    // An edit: the new version holds from when it was made, and closes the first one there.
    engine
        .update_record(
            &card.id.0,
            &aril_engine::MemoryEdit {
                text: Some("Card: I love my beagle Pimenta.".into()),
                ..Default::default()
            },
            &everyone,
        )
        .unwrap();
    let history = engine.record_history(&card.id.0, &everyone).unwrap();
    assert_eq!(history[0].valid_from, said);
    assert_eq!(history[0].valid_to, Some(history[1].valid_from));
    assert_eq!(history[1].valid_to, None);

    // Forgotten a second from now: it holds until then, and is gone after.
    // To the microsecond, as the stores keep it.
    let soon = (Utc::now() + chrono::Duration::seconds(1)).trunc_subsecs(6);
    let record = engine
        .set_record_validity(&card.id.0, Some(soon), &everyone)
        .unwrap();
    assert_eq!(record.valid_to, Some(soon));
    let profile = engine.profile(&ScopeFilter::user("u")).unwrap();
    assert_eq!(profile.preferences.len(), 1, "it still holds: {profile:?}");
    std::thread::sleep(std::time::Duration::from_millis(1200));
    let profile = engine.profile(&ScopeFilter::user("u")).unwrap();
    assert!(profile.preferences.is_empty(), "{profile:?}");
    let r = engine
        .recall_planned(&request("Which dog do I like?"), None)
        .unwrap();
    assert!(
        r.items
            .iter()
            .all(|i| i.kind != UnitKind::Card || !i.text.contains("Pimenta")),
        "{:?}",
        r.items
    );
    assert!(
        r.items.iter().any(|i| i.kind == UnitKind::Card),
        "others stay"
    );
    let history = engine.record_history(&card.id.0, &everyone).unwrap();
    let last = history.last().unwrap();
    assert_eq!(last.event, "FORGET");
    assert_eq!(last.valid_to, Some(soon));
    assert_eq!(last.valid_from, history[1].valid_from, "the same statement");

    // Restored, it is back.
    engine
        .set_record_validity(&card.id.0, None, &everyone)
        .unwrap();
    let profile = engine.profile(&ScopeFilter::user("u")).unwrap();
    assert_eq!(profile.preferences.len(), 1, "{profile:?}");
}
