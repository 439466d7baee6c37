//! The memory inspector (`/ui`) in a real browser: Debian's Chromium, headless, driven through
//! ChromeDriver (the WebDriver protocol, by `fantoccini`), against `aril serve` over the demo's
//! memory. It signs in with a key, finds the segment where the dog was adopted, asks the
//! playground why "What is the name of Sam's dog?" recalled what it did (and what the reranker
//! did), deletes that memory and a session (then the API no longer has them), checks that another
//! user's key cannot open Sam's pages, and that an admin sees every user and the cost.
//! Screenshots go to `target/tmp/ui-screenshots/`.
//!
//! Needs `chromium` and `chromedriver` (Debian's `chromium` and `chromium-driver`, which
//! `scripts/test` installs): `ARIL_TEST_CHROMEDRIVER` and `ARIL_TEST_CHROMIUM` name them when
//! they are elsewhere.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

use super::{Served, aril, ok};

/// A ChromeDriver on a free loopback port; killed when dropped.
struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    fn start() -> Self {
        let program = std::env::var("ARIL_TEST_CHROMEDRIVER")
            .unwrap_or_else(|_| "/usr/bin/chromedriver".into());
        assert!(
            Path::new(&program).exists(),
            "no ChromeDriver at {program}: install Debian's chromium and chromium-driver \
             (scripts/test does), or name it in ARIL_TEST_CHROMEDRIVER"
        );
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let child = Command::new(&program)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {program}: {e}"));
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "ChromeDriver did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        Driver { child, url }
    }

    /// A headless Chromium session (no network but loopback: the flags keep Chromium from
    /// calling home).
    async fn browser(&self, profile: &Path) -> Client {
        let binary =
            std::env::var("ARIL_TEST_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            serde_json::json!({
                "binary": binary,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--disable-quic", "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--window-size=1280,1000",
                    format!("--user-data-dir={}", profile.display()),
                ],
            }),
        );
        // ChromeDriver is on loopback: plain HTTP, no TLS.
        ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&self.url)
            .await
            .expect("a Chromium session through ChromeDriver")
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `/v1/rerank` endpoint (the Jina/Cohere protocol) scoring each document by the words it
/// shares with the query: no registry package carries cross-encoder weights, so the protocol is
/// played with an overlap score, as in `aril-llm`'s rerank tests. Returns its base URL.
async fn word_overlap_reranker() -> String {
    async fn rerank(body: axum::Json<Value>) -> axum::Json<Value> {
        let words = |s: &str| -> Vec<String> {
            s.split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
                .map(str::to_lowercase)
                .collect()
        };
        let query = words(body["query"].as_str().unwrap_or_default());
        let results: Vec<Value> = body["documents"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .enumerate()
            .map(|(index, d)| {
                let shared = words(d.as_str().unwrap_or_default())
                    .iter()
                    .filter(|w| query.contains(w))
                    .count();
                json!({"index": index, "relevance_score": shared as f64})
            })
            .collect();
        axum::Json(json!({ "results": results }))
    }
    let app = axum::Router::new().route("/v1/rerank", axum::routing::post(rerank));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/v1")
}

/// Where the screenshots go.
fn shots() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ui-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn screenshot(c: &Client, name: &str) {
    let png = c.screenshot().await.unwrap();
    assert!(png.starts_with(b"\x89PNG"), "{name}: not a PNG");
    std::fs::write(shots().join(format!("{name}.png")), png).unwrap();
}

/// Clicks what loads another page, and waits until that page is there (the old one gone stale).
async fn click_and_load(c: &Client, target: Locator<'_>) {
    let old = c.find(Locator::Css("html")).await.unwrap();
    c.find(target).await.unwrap().click().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while old.tag_name().await.is_ok() {
        assert!(Instant::now() < deadline, "the click loaded no page");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    c.wait().for_element(Locator::Css("body")).await.unwrap();
}

async fn text_of(c: &Client) -> String {
    c.wait()
        .for_element(Locator::Css("body"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

async fn sign_in(c: &Client, base: &str, key: &str) {
    c.goto(&format!("{base}/ui")).await.unwrap();
    assert!(
        c.current_url().await.unwrap().path().ends_with("/ui/login"),
        "an unsigned browser is sent to the login page"
    );
    c.find(Locator::Css("input[name=key]"))
        .await
        .unwrap()
        .send_keys(key)
        .await
        .unwrap();
    click_and_load(c, Locator::Css("form[action='/ui/login'] button")).await;
}

/// Waits until the page says who is signed in (the login's redirects have landed).
async fn signed_in_as(c: &Client, who: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(e) = c.find(Locator::Css("span.who")).await
            && e.text().await.is_ok_and(|t| t == who)
        {
            return;
        }
        assert!(Instant::now() < deadline, "not signed in as {who}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn sign_out(c: &Client) {
    click_and_load(c, Locator::Css("form[action='/ui/logout'] button")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspector_in_a_real_browser() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    ok(aril(&data).args(["demo", "--questions", "0"]));
    let key = |args: &[&str]| {
        ok(aril(&data).args(["keys", "create"]).args(args))
            .trim()
            .to_string()
    };
    let (sam, eve, admin) = (
        key(&["--user", "sam"]),
        key(&["--user", "eve"]),
        key(&["--admin"]),
    );
    let reranker = word_overlap_reranker().await;
    let served = Served::spawn(
        aril(&data)
            .args(["serve", "--bind", "127.0.0.1:0"])
            .env("ARIL_LLM_RERANKER_BASE_URL", &reranker)
            .env("ARIL_LLM_RERANKER_MODEL", "word-overlap"),
    );
    let base = served.base.clone();
    let driver = Driver::start();
    let c = driver.browser(&dir.path().join("chromium")).await;

    // The page carries the policy that forbids scripts and other origins.
    let http = reqwest::Client::new();
    let login = http.get(format!("{base}/ui/login")).send().await.unwrap();
    let csp = login.headers()["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("default-src 'none'") && !csp.contains("script-src"));

    // The key is kept where no script and no other site can reach it.
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let signed = no_redirects
        .post(format!("{base}/ui/login"))
        .form(&[("key", sam.as_str())])
        .send()
        .await
        .unwrap();
    let cookie = signed.headers()["set-cookie"].to_str().unwrap();
    for part in ["HttpOnly", "SameSite=Strict", "Path=/ui"] {
        assert!(cookie.contains(part), "{cookie} lacks {part}");
    }

    // A wrong key is refused and says so.
    sign_in(&c, &base, "not-a-key").await;
    assert!(text_of(&c).await.contains("not known to this server"));

    // Sam's key opens Sam's timeline: the segment where the dog was adopted, with its boundary.
    sign_in(&c, &base, &sam).await;
    signed_in_as(&c, "user sam").await;
    let page = text_of(&c).await;
    assert!(page.contains("Timeline of sam"), "{page}");
    let adopted = c
        .find(Locator::XPath(
            "//div[@class='turn'][.//div[contains(text(),'adopted a dog')]]",
        ))
        .await
        .expect("the turn where the dog was adopted");
    let segment = adopted
        .find(Locator::XPath("ancestor::article"))
        .await
        .unwrap();
    let boundary = segment.find(Locator::Css(".boundary")).await.unwrap();
    let boundary = boundary.text().await.unwrap();
    assert!(
        boundary.contains("segment closed:") && boundary.contains("boundary score"),
        "{boundary}"
    );
    // The adoption's segment, its turn marked, for the screenshot.
    let anchor = adopted.attr("id").await.unwrap().unwrap();
    c.goto(&format!("{base}/ui/user?u=sam#{anchor}"))
        .await
        .unwrap();
    screenshot(&c, "timeline").await;

    // The playground: every path's list, the fused list and the context with its token count.
    c.goto(&format!("{base}/ui/recall?u=sam")).await.unwrap();
    c.find(Locator::Css("input[name=q]"))
        .await
        .unwrap()
        .send_keys("What is the name of Sam's dog?")
        .await
        .unwrap();
    click_and_load(&c, Locator::Css("form.recall button")).await;
    let page = text_of(&c).await;
    for part in [
        "The context as a model receives it",
        "o200k tokens",
        "Fused (RRF)",
        "dense turns",
        "BM25 turns",
    ] {
        assert!(page.contains(part), "the playground shows {part:?}");
    }
    // The cross-encoder's work on the path: its head in the new order, each unit's old rank.
    assert!(
        page.contains("reranker: word-overlap: the top 30 of each path reordered"),
        "{page}"
    );
    let rows = c
        .find_all(Locator::Css("section.rerank tbody tr"))
        .await
        .unwrap();
    assert!(rows.len() >= 2, "the reranked head is listed: {page}");
    let first_row = rows[0].text().await.unwrap();
    assert!(first_row.starts_with("1 "), "{first_row}");
    let first = c.find(Locator::Css("section.results li")).await.unwrap();
    let first = first.text().await.unwrap();
    assert!(
        first.contains("Pimenta"),
        "the first result names the dog: {first}"
    );
    screenshot(&c, "recall").await;

    // Delete the adoption turn's memory from its page, through the confirmation.
    c.goto(&format!("{base}/ui/user?u=sam")).await.unwrap();
    let memory_link = c
        .find(Locator::XPath(
            "//div[@class='turn'][.//div[contains(text(),'adopted a dog')]]//a[text()='memory']",
        ))
        .await
        .unwrap();
    let href = memory_link.attr("href").await.unwrap().unwrap();
    let id = href.rsplit("id=").next().unwrap().to_string();
    c.goto(&format!("{base}{href}")).await.unwrap();
    click_and_load(&c, Locator::LinkText("Delete this memory…")).await;
    let confirm = text_of(&c).await;
    assert!(
        confirm.contains("adopted a dog") && confirm.contains("cannot be undone"),
        "{confirm}"
    );
    screenshot(&c, "delete").await;
    click_and_load(&c, Locator::Css("form[action='/ui/delete'] button")).await;
    let page = text_of(&c).await;
    assert!(page.contains("Deleted memory"), "{page}");
    assert!(
        !page.contains("adopted a dog"),
        "the turn is gone from the timeline"
    );
    let api = http
        .get(format!("{base}/v1/memories/{id}/"))
        .header("Authorization", format!("Token {sam}"))
        .send()
        .await
        .unwrap();
    assert_eq!(api.status(), 404, "the API no longer has the memory");

    // Delete a whole session from its heading, through the confirmation that names what goes.
    c.goto(&format!("{base}/ui/user?u=sam")).await.unwrap();
    let heading = c
        .find(Locator::XPath(
            "//h2[@class='session'][contains(., 'session_3')]",
        ))
        .await
        .expect("the heading of the third session");
    let href = heading
        .find(Locator::LinkText("Delete this session…"))
        .await
        .unwrap()
        .attr("href")
        .await
        .unwrap()
        .unwrap();
    c.goto(&format!("{base}{href}")).await.unwrap();
    let confirm = text_of(&c).await;
    assert!(
        confirm.contains("Delete session \"session_3\" of conversation \"demo\"?")
            && confirm.contains("This deletes 10 turns of sam")
            && confirm.contains("knee started hurting")
            && confirm.contains("cannot be undone"),
        "{confirm}"
    );
    screenshot(&c, "delete-session").await;
    click_and_load(&c, Locator::Css("form[action='/ui/delete-session'] button")).await;
    let page = text_of(&c).await;
    assert!(page.contains("Deleted session \"session_3\""), "{page}");
    assert!(
        !page.contains("knee started hurting"),
        "its turns are gone from the timeline"
    );
    assert!(page.contains("session_4"), "the other sessions stay");
    let listed = http
        .get(format!("{base}/v1/memories/?user_id=sam&page_size=1000"))
        .header("Authorization", format!("Token {sam}"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        !listed.contains("knee started hurting") && listed.contains("Lisbon Marathon"),
        "the API lists the other sessions' memories only: {listed}"
    );

    // Another user's key cannot open Sam's pages, nor the cost.
    sign_out(&c).await;
    sign_in(&c, &base, &eve).await;
    signed_in_as(&c, "user eve").await;
    for page in [
        "/ui/user?u=sam",
        "/ui/recall?u=sam&q=dog",
        "/ui/cards?u=sam",
        "/ui/cost",
    ] {
        c.goto(&format!("{base}{page}")).await.unwrap();
        let text = text_of(&c).await;
        assert!(
            text.contains("Error 403"),
            "{page} is refused to eve: {text}"
        );
        assert!(!text.contains("Pimenta"), "{page} shows nothing of sam");
    }
    let own = http
        .get(format!("{base}/ui/user?u=sam"))
        .header("Cookie", format!("aril_key={eve}"))
        .send()
        .await
        .unwrap();
    assert_eq!(own.status(), 403);

    // An admin sees every user and the cost.
    sign_out(&c).await;
    sign_in(&c, &base, &admin).await;
    signed_in_as(&c, "admin").await;
    let page = text_of(&c).await;
    assert!(page.contains("Users") && page.contains("sam"), "{page}");
    for column in ["waiting", "failed", "text KiB", "last write"] {
        assert!(
            page.contains(column),
            "the users page shows {column:?}: {page}"
        );
    }
    c.goto(&format!("{base}/ui/cost")).await.unwrap();
    let page = text_of(&c).await;
    assert!(page.contains("closed segments"), "{page}");
    assert!(
        page.contains("Turns stored per day: embedded as stored, and not")
            && page.contains("dense roles (user)"),
        "{page}"
    );
    screenshot(&c, "cost").await;
    c.close().await.unwrap();
}

/// With the local model (llama-server and SmolLM2, from the cache `scripts/fetch-llm` fills):
/// the demo's segments written into cards, then `aril ui` with the same model as its planner.
/// The timeline shows the cards beside their segments, the cards page lists them with their
/// history, the playground shows the plan, and the cost page the calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspector_shows_cards_the_plan_and_the_cost_with_the_local_model() {
    // Its health check is a blocking client: off the async threads.
    let model = tokio::task::spawn_blocking(aril_engine::llm::LocalServer::from_cache)
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}"));
    let with_model = |cmd: &mut Command| {
        cmd.env("ARIL_LLM_BASE_URL", &model.endpoint().base_url)
            .env("ARIL_LLM_MODEL", &model.endpoint().model)
            .env_remove("ARIL_LLM_API_KEY");
    };
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    ok(aril(&data).args(["demo", "--questions", "0"]));
    let mut consolidate = aril(&data);
    // Two segments (the first session's) are enough to show cards; small bounds: the tiny model
    // fills whatever room it gets, slowly.
    consolidate.args(["consolidate", "--limit", "2", "--max-cards", "1"]);
    consolidate.args(["--max-tokens", "300"]);
    with_model(&mut consolidate);
    ok(&mut consolidate);
    let mut ui = aril(&data);
    ui.args(["ui", "--bind", "127.0.0.1:0", "--no-consolidate"]);
    with_model(&mut ui);
    let served = Served::spawn(&mut ui);
    let base = served.base.clone();
    let driver = Driver::start();
    let c = driver.browser(&dir.path().join("chromium")).await;

    // No keys: the local user is an admin at once, and the timeline shows cards.
    c.goto(&format!("{base}/ui/user?u=sam")).await.unwrap();
    let cards = c.find_all(Locator::Css("aside.cards .card")).await.unwrap();
    assert!(!cards.is_empty(), "cards beside their segments");
    let sources = c
        .find_all(Locator::Css("aside.cards .card .sources a"))
        .await
        .unwrap();
    let anchor = sources[0].attr("href").await.unwrap().unwrap();
    assert!(
        anchor.starts_with("#t-"),
        "a card links to its source turn: {anchor}"
    );
    assert!(
        c.find(Locator::Css(&format!("div.turn[id='{}']", &anchor[1..])))
            .await
            .is_ok(),
        "its source turn is on the page"
    );
    screenshot(&c, "timeline-cards").await;

    // The cards page lists them with their type; a card's page shows its history.
    c.goto(&format!("{base}/ui/cards?u=sam")).await.unwrap();
    let listed = c.find_all(Locator::Css(".cardlist .card")).await.unwrap();
    assert!(!listed.is_empty());
    click_and_load(&c, Locator::Css(".cardlist .card a.small")).await;
    let page = text_of(&c).await;
    assert!(page.contains("Versions") && page.contains("ADD"), "{page}");

    // The playground plans with the model and shows the plan.
    c.goto(&format!(
        "{base}/ui/recall?u=sam&asked_at=2024-10-01&q=What%20is%20the%20name%20of%20Sam%27s%20dog%3F"
    ))
    .await
    .unwrap();
    let page = text_of(&c).await;
    assert!(page.contains("The plan"), "{page}");
    assert!(!page.contains("no planner model is configured"));
    screenshot(&c, "recall-planned").await;

    // The cost page shows the encoder's and the planner's calls.
    c.goto(&format!("{base}/ui/cost")).await.unwrap();
    let page = text_of(&c).await;
    for purpose in ["encode", "plan"] {
        assert!(
            page.lines().any(|l| l.starts_with(purpose)),
            "a row for {purpose}: {page}"
        );
    }
    assert!(c.find(Locator::Css("svg.chart rect")).await.is_ok());
    assert!(
        page.contains("Model tokens per day, by purpose"),
        "the tokens over time: {page}"
    );
    screenshot(&c, "cost").await;
    c.close().await.unwrap();
}
