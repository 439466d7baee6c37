//! `aril ask`: the planned read path from the command line. The planner (`ARIL_LLM_PLANNER_*`,
//! else `ARIL_LLM_*`) is optional — without it the question is searched as asked, and the output
//! says so; the answerer is required unless `--context-only`.

use aril_engine::llm::{ChatModel, OpenAiClient, Role};
use aril_engine::{AskRequest, Engine};

use crate::args::AskCmd;
use crate::models;

pub fn run(mut engine: Engine, cmd: &AskCmd) -> anyhow::Result<()> {
    let llm = engine.config().llm.clone();
    engine.set_reranker(models::reranker(&llm)?);
    let asked_at = crate::args::parse_at(cmd.at.as_deref())?;
    let request = AskRequest {
        filter: cmd.scope.filter()?,
        question: cmd.question.clone(),
        asked_at,
        k: cmd.k,
        budget: cmd.budget,
        single_list: false,
        known_texts: Vec::new(),
    };
    let planner: Option<OpenAiClient> = models::client(Role::Planner, &llm)?;
    let planner = planner.as_ref().map(|p| p as &dyn ChatModel);
    if cmd.context_only {
        let recalled = engine.recall_planned(&request, planner)?;
        if cmd.json {
            println!("{}", serde_json::to_string_pretty(&recalled)?);
        } else {
            print_recalled(&recalled);
        }
        return Ok(());
    }
    let answerer = models::required(Role::Answerer, &llm)?;
    let response = engine.ask(&request, planner, &answerer)?;
    if cmd.json {
        println!("{}", serde_json::to_string_pretty(&response)?);
        return Ok(());
    }
    println!("{}\n", response.answer);
    print_recalled(&response.recalled);
    println!(
        "cost: {} LLM calls, {} prompt + {} completion tokens",
        response.cost.llm_calls, response.cost.prompt_tokens, response.cost.completion_tokens
    );
    Ok(())
}

fn print_recalled(r: &aril_engine::Recalled) {
    if let Some(note) = &r.plan_note {
        println!("plan: {note}");
    }
    for (i, p) in r.plan.paths.iter().enumerate() {
        println!("path {}: {} — \"{}\"", i + 1, p.goal, p.query);
    }
    println!("rerank: {}", r.reranker);
    println!(
        "context: {} units, {} tokens (newest first)",
        r.items.len(),
        r.context_tokens
    );
    for line in r.context.lines() {
        println!("  {line}");
    }
}
