//! What [`LocalServer`] says when the server it starts dies before it is ready: which binary, how
//! it ended (the signal), its last lines, and how to heal a cached build. The dying server is a
//! real process that writes to stderr and then kills itself with SIGSEGV, as the llama-server of
//! a `-march=native` build did on an AVX-512 CPU.

use std::os::unix::fs::PermissionsExt;

use aril_llm::{LlmError, LocalServer};

#[test]
fn a_server_that_dies_before_it_is_ready_is_reported_with_its_signal_and_last_lines() {
    let dir = tempfile::tempdir().unwrap();
    let server = dir.path().join("llama-server");
    std::fs::write(
        &server,
        "#!/bin/sh\n\
         for i in $(seq 1 30); do echo \"startup line $i\" >&2; done\n\
         echo 'llama threadpool init' >&2\n\
         kill -SEGV $$\n",
    )
    .unwrap();
    std::fs::set_permissions(&server, std::fs::Permissions::from_mode(0o755)).unwrap();
    let model = dir.path().join("model.gguf");
    std::fs::write(&model, b"GGUF").unwrap();

    let err = match LocalServer::start(&server, &model, 1) {
        Ok(_) => panic!("a server that kills itself was reported ready"),
        Err(e) => e,
    };
    assert!(matches!(err, LlmError::ServerDied { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains(&server.display().to_string()), "{message}");
    assert!(message.contains("signal: 11 (SIGSEGV)"), "{message}");
    assert!(message.contains("llama threadpool init"), "{message}");
    assert!(message.contains("startup line 30"), "{message}");
    // Only the last lines: the first of 31 is left out.
    assert!(!message.contains("startup line 1\n"), "{message}");
    assert!(message.contains("run scripts/fetch-llm again"), "{message}");
}
