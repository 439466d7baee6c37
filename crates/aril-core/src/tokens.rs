//! Token counting with OpenAI's o200k tokenizer, so budgets and costs compare across models.
//! The vocabulary ships inside the `tiktoken-rs` crate: nothing is downloaded.

use std::sync::OnceLock;

use tiktoken_rs::CoreBPE;

fn bpe() -> &'static CoreBPE {
    static BPE: OnceLock<CoreBPE> = OnceLock::new();
    // The vocabulary is compiled into the crate; failing to parse it is a build defect, not input.
    BPE.get_or_init(|| tiktoken_rs::o200k_base().expect("o200k vocabulary bundled in tiktoken-rs"))
}

/// Number of o200k tokens in `text`.
pub fn count(text: &str) -> usize {
    bpe().encode_ordinary(text).len()
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_words_as_tokens() {
        assert_eq!(super::count(""), 0);
        let n = super::count("The cat sits outside on the warm porch.");
        assert!((7..=10).contains(&n), "{n}");
    }
}
