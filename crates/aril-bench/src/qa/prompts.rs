//! The answer prompt and the judge prompts, in our own words. The judge rubrics follow the
//! published ones (Mem0's LoCoMo judge; LongMemEval's per-type judges): what counts as correct is
//! the same, the wording is not, so judged accuracy is comparable in kind, not to the decimal.

use super::JudgeRubric;

/// For the answerer: short answers from the memories, dates made absolute, the newest fact wins.
pub const ANSWER: &str = "You answer a question about earlier conversations, using only the \
memories given. Each memory starts with the date of its session. Answer with a short phrase, \
reusing the memories' own words where you can. When a memory uses a relative date (\"yesterday\", \
\"last year\"), work out the absolute date from the session date and answer with that. When \
memories disagree, the most recent one is right. If the memories do not contain the answer, say \
\"not mentioned\".";

/// The judge prompt for one answer and its labels (the first label means correct).
pub fn judge(
    rubric: JudgeRubric,
    question: &str,
    gold: &str,
    answer: &str,
) -> (String, [&'static str; 2]) {
    let case = format!("Question: {question}\nGold answer: {gold}\nGenerated answer: {answer}\n");
    match rubric {
        JudgeRubric::Locomo => (
            format!(
                "Label a generated answer CORRECT or WRONG against a gold answer. The question \
                 was asked by one person about things said in their earlier conversations with \
                 another; the gold answer is short. Grade generously: a longer generated answer \
                 is CORRECT when it is about the same thing as the gold answer. For questions \
                 about time, it is CORRECT when it names the same date or period, in any format \
                 or as a relative reference that resolves to it.\n\n{case}\nReply with the label \
                 as JSON: {{\"label\": \"CORRECT\"}} or {{\"label\": \"WRONG\"}}."
            ),
            ["CORRECT", "WRONG"],
        ),
        JudgeRubric::Abstention => (
            format!(
                "The question below cannot be answered from the conversation history. Say yes \
                 if the generated answer recognises that (says the information is not there or \
                 not known), no otherwise.\n\nQuestion: {question}\nExplanation: {gold}\n\
                 Generated answer: {answer}\n\nReply as JSON: {{\"label\": \"yes\"}} or \
                 {{\"label\": \"no\"}}."
            ),
            ["yes", "no"],
        ),
        JudgeRubric::Preference => (
            format!(
                "Say yes if the generated answer satisfies the rubric, no otherwise. It need not \
                 mention every point of the rubric; it must use the user's personal information \
                 correctly.\n\nQuestion: {question}\nRubric: {gold}\nGenerated answer: {answer}\
                 \n\nReply as JSON: {{\"label\": \"yes\"}} or {{\"label\": \"no\"}}."
            ),
            ["yes", "no"],
        ),
        JudgeRubric::Standard | JudgeRubric::Temporal | JudgeRubric::KnowledgeUpdate => {
            let extra = match rubric {
                JudgeRubric::Temporal => {
                    " Do not count an off-by-one error in a number of days, weeks or months \
                     against it."
                }
                JudgeRubric::KnowledgeUpdate => {
                    " If it also mentions older information, it is still correct as long as the \
                     updated answer it gives is the gold one."
                }
                _ => "",
            };
            (
                format!(
                    "Say yes if the generated answer contains the gold answer, or is equivalent \
                     to it, or holds all the steps needed to reach it; say no if it only holds \
                     part of it or contradicts it.{extra}\n\n{case}\nReply as JSON: \
                     {{\"label\": \"yes\"}} or {{\"label\": \"no\"}}."
                ),
                ["yes", "no"],
            )
        }
    }
}
