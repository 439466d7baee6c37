//! What an application asks of the cards of one write — Mem0's `custom_instructions`,
//! `includes`, `excludes` and `custom_categories` — added to the encoder's instructions for that
//! write only. It steers what the model writes; the checks on the reply stay the same.

/// A category an application sorts memories into, with what belongs in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Category {
    pub name: String,
    pub description: String,
}

/// The application's requests for one write (empty: none).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Guidance {
    /// Free instructions (`custom_instructions`).
    pub instructions: Option<String>,
    /// What to remember (`includes`).
    pub includes: Option<String>,
    /// What never to remember (`excludes`).
    pub excludes: Option<String>,
    /// Categories whose names go into the topics of the cards they fit (`custom_categories`).
    pub categories: Vec<Category>,
}

/// The longest text a request may add, in characters (the prompt's budget is the model's).
pub const MAX_GUIDANCE_CHARS: usize = 4_000;
/// Categories at most.
pub const MAX_CATEGORIES: usize = 50;

impl Guidance {
    pub fn is_empty(&self) -> bool {
        self.instructions.is_none()
            && self.includes.is_none()
            && self.excludes.is_none()
            && self.categories.is_empty()
    }

    /// What is wrong with it, if anything: an empty or overlong text, too many categories, a
    /// category without a name.
    pub fn check(&self) -> Result<(), String> {
        let texts = [
            ("custom_instructions", &self.instructions),
            ("includes", &self.includes),
            ("excludes", &self.excludes),
        ];
        for (field, text) in texts {
            if let Some(t) = text {
                if t.trim().is_empty() {
                    return Err(format!("{field} is empty: leave it out or say something"));
                }
                if t.chars().count() > MAX_GUIDANCE_CHARS {
                    return Err(format!(
                        "{field} is longer than {MAX_GUIDANCE_CHARS} characters"
                    ));
                }
            }
        }
        if self.categories.len() > MAX_CATEGORIES {
            return Err(format!(
                "custom_categories has {} categories, at most {MAX_CATEGORIES}",
                self.categories.len()
            ));
        }
        if let Some(c) = self.categories.iter().find(|c| c.name.trim().is_empty()) {
            return Err(format!(
                "a custom category has no name (described {:?})",
                c.description
            ));
        }
        let described: usize = self
            .categories
            .iter()
            .map(|c| c.name.chars().count() + c.description.chars().count())
            .sum();
        if described > MAX_GUIDANCE_CHARS {
            return Err(format!(
                "custom_categories take more than {MAX_GUIDANCE_CHARS} characters"
            ));
        }
        Ok(())
    }

    /// The paragraph added to the encoder's system message (empty when there is nothing).
    pub(crate) fn render(&self) -> String {
        if self.is_empty() {
            return String::new();
        }
        let mut out = String::from(
            "\n\nThe application that keeps this memory asks the following of these cards; follow \
             it within the rules above.",
        );
        if let Some(t) = &self.instructions {
            out.push_str(&format!("\nInstructions: {}", t.trim()));
        }
        if let Some(t) = &self.includes {
            out.push_str(&format!("\nRemember only: {}", t.trim()));
        }
        if let Some(t) = &self.excludes {
            out.push_str(&format!(
                "\nNever write a card about: {} (write no card rather than one about these).",
                t.trim()
            ));
        }
        if !self.categories.is_empty() {
            out.push_str(
                "\nCategories: put in each card's topics the exact names of the categories it \
                 belongs to:",
            );
            for c in &self.categories {
                match c.description.trim() {
                    "" => out.push_str(&format!("\n- {}", c.name.trim())),
                    d => out.push_str(&format!("\n- {}: {d}", c.name.trim())),
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_request_is_said_and_nothing_is_said_without_one() {
        assert_eq!(Guidance::default().render(), "");
        let g = Guidance {
            instructions: Some("Write in the third person.".into()),
            includes: None,
            excludes: Some("health".into()),
            categories: vec![Category {
                name: "travel".into(),
                description: "trips and places".into(),
            }],
        };
        let text = g.render();
        assert!(
            text.contains("Instructions: Write in the third person."),
            "{text}"
        );
        assert!(text.contains("Never write a card about: health"), "{text}");
        assert!(text.contains("- travel: trips and places"), "{text}");
        assert!(!text.contains("Remember only"), "{text}");
    }

    #[test]
    fn empty_or_oversized_requests_are_refused() {
        let empty = Guidance {
            includes: Some("  ".into()),
            ..Default::default()
        };
        assert!(empty.check().unwrap_err().contains("includes is empty"));
        let long = Guidance {
            instructions: Some("x".repeat(MAX_GUIDANCE_CHARS + 1)),
            ..Default::default()
        };
        assert!(long.check().is_err());
        let nameless = Guidance {
            categories: vec![Category {
                name: " ".into(),
                description: "d".into(),
            }],
            ..Default::default()
        };
        assert!(nameless.check().unwrap_err().contains("no name"));
    }
}
