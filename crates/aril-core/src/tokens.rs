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

/// The o200k tokens of `text` with the byte range each covers, widened to character boundaries
/// (a token may end inside a multi-byte character).
pub fn encode_with_spans(text: &str) -> (Vec<u32>, Vec<(usize, usize)>) {
    let ids = bpe().encode_ordinary(text);
    let mut spans = Vec::with_capacity(ids.len());
    let mut at = 0usize;
    for id in &ids {
        let len = bpe().decode_bytes(&[*id]).map(|b| b.len()).unwrap_or(0);
        let mut start = at.min(text.len());
        while !text.is_char_boundary(start) {
            start -= 1;
        }
        let mut end = (at + len).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        spans.push((start, end));
        at += len;
    }
    (ids, spans)
}

/// The text of o200k tokens (bytes that are not valid UTF-8 become U+FFFD).
pub fn decode(ids: &[u32]) -> String {
    bpe()
        .decode_bytes(ids)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_words_as_tokens() {
        assert_eq!(super::count(""), 0);
        let n = super::count("The cat sits outside on the warm porch.");
        assert!((7..=10).contains(&n), "{n}");
    }

    #[test]
    fn spans_cover_the_text_on_character_boundaries_and_decode_round_trips() {
        let text = "Café naïve — 日本語 ok";
        let (ids, spans) = super::encode_with_spans(text);
        assert_eq!(super::decode(&ids), text);
        assert_eq!(spans.first().map(|s| s.0), Some(0));
        assert_eq!(spans.last().map(|s| s.1), Some(text.len()));
        for (a, b) in spans {
            assert!(text.is_char_boundary(a) && text.is_char_boundary(b) && a <= b);
        }
    }
}
