//! Browser-test harness shared by `browser.rs` and `compare.rs`: a static server for `dist/`,
//! chromedriver + headless Chromium sessions closed before asserting, DOM helpers.
#![allow(dead_code)]
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

pub fn dist_dir() -> PathBuf {
    let d = repo_root().join("dist");
    assert!(
        d.join("index.html").is_file() && d.join("worker_loader.js").is_file(),
        "dist/ is missing or incomplete: build the page first with scripts/build-web.sh"
    );
    d
}

pub fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "js" => "text/javascript; charset=utf-8",
        "wasm" => "application/wasm",
        "css" => "text/css; charset=utf-8",
        "svg" => "image/svg+xml",
        "json" => "application/json",
        _ => "application/octet-stream",
    }
}

pub fn serve_one(mut stream: TcpStream, root: &Path) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    // Drain the headers.
    loop {
        let mut l = String::new();
        if reader.read_line(&mut l).unwrap_or(0) == 0 || l == "\r\n" {
            break;
        }
    }
    let path = request_line.split_whitespace().nth(1).unwrap_or("/");
    let path = path.split(['?', '#']).next().unwrap_or("/");
    let rel = if path == "/" {
        "index.html"
    } else {
        path.trim_start_matches('/')
    };
    let file = root.join(rel);
    let ok = !rel.contains("..") && file.is_file();
    let (status, body, ctype) = if ok {
        (
            "200 OK",
            std::fs::read(&file).unwrap_or_default(),
            content_type(&file),
        )
    } else {
        ("404 Not Found", b"not found".to_vec(), "text/plain")
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(&body);
}

/// A tiny static server for dist/, started once per test binary; returns its base URL.
pub fn server() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        let root = dist_dir();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let root = root.clone();
                std::thread::spawn(move || serve_one(stream, &root));
            }
        });
        format!("http://127.0.0.1:{port}/")
    })
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub struct Driver(Child);
impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn start_chromedriver() -> (Driver, u16) {
    let port = free_port();
    let child = Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver not found on PATH: run scripts/setup-web-tools.sh");
    let d = Driver(child);
    let t0 = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "chromedriver did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (d, port)
}

pub async fn new_session(port: u16, profile: &Path) -> Client {
    new_session_with(port, profile, &[]).await
}

/// A session with extra Chromium arguments (a later `--window-size` wins over the default).
/// `--servesim-viewport=WxH` is not passed to Chromium: it becomes chromedriver's mobile
/// emulation of a W x H viewport (headless windows are at least 500 px wide).
pub async fn new_session_with(port: u16, profile: &Path, extra: &[&str]) -> Client {
    let viewport = extra.iter().find_map(|a| {
        let (w, h) = a.strip_prefix("--servesim-viewport=")?.split_once('x')?;
        Some((w.parse::<u32>().ok()?, h.parse::<u32>().ok()?))
    });
    let extra: Vec<&str> = extra
        .iter()
        .copied()
        .filter(|a| !a.starts_with("--servesim-viewport="))
        .collect();
    let mut args: Vec<String> = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    if !extra.iter().any(|a| a.starts_with("--window-size=")) {
        args.push("--window-size=1440,1000".into());
    }
    args.extend(extra.iter().map(|a| a.to_string()));
    args.push(format!("--user-data-dir={}", profile.display()));
    let mut caps = json!({
        "goog:chromeOptions": {
            "binary": "/usr/bin/chromium",
            "args": args,
        }
    });
    if let Some((w, h)) = viewport {
        caps["goog:chromeOptions"]["mobileEmulation"] =
            json!({ "deviceMetrics": { "width": w, "height": h, "pixelRatio": 1.0 } });
    }
    let caps = caps.as_object().unwrap().clone();
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{port}"))
        .await
        .expect("could not start a Chromium session through chromedriver")
}

pub fn fresh_profile(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "servesim-e2e-{tag}-{}-{}",
        std::process::id(),
        Instant::now().elapsed().as_nanos()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `body` in a fresh browser session, always closing it (and chromedriver) before
/// returning the body's result for the caller to assert on.
pub async fn with_browser<T, F, Fut>(tag: &str, body: F) -> T
where
    F: FnOnce(Client, String) -> Fut,
    Fut: std::future::Future<Output = (Client, Res<T>)>,
{
    with_browser_args(tag, &[], body).await
}

/// [`with_browser`] with extra Chromium arguments (window size, V8 flags).
pub async fn with_browser_args<T, F, Fut>(tag: &str, extra: &[&str], body: F) -> T
where
    F: FnOnce(Client, String) -> Fut,
    Fut: std::future::Future<Output = (Client, Res<T>)>,
{
    // One browser at a time (the machine has 2 cores), even without --test-threads=1.
    static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _guard = SERIAL.lock().await;
    let base = server().to_string();
    let (driver, port) = start_chromedriver();
    let profile = fresh_profile(tag);
    let client = new_session_with(port, &profile, extra).await;
    let (client, result) = body(client, base).await;
    let _ = client.close().await;
    drop(driver);
    let _ = std::fs::remove_dir_all(&profile);
    match result {
        Ok(v) => v,
        Err(e) => panic!("browser test `{tag}` failed: {e}"),
    }
}

/// Polls `check` until it returns Some or `timeout` passes.
pub async fn wait_until<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> Res<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Res<Option<T>>>,
{
    let t0 = Instant::now();
    loop {
        if let Some(v) = check().await? {
            return Ok(v);
        }
        if t0.elapsed() > timeout {
            return Err(format!("timed out after {timeout:?} waiting for {what}").into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub async fn text_of(c: &Client, css: &str) -> Res<Option<String>> {
    match c.find(Locator::Css(css)).await {
        Ok(e) => Ok(Some(e.text().await?)),
        Err(e) if e.is_no_such_element() => Ok(None),
        Err(e) => Err(e.into()),
    }
}

pub async fn wait_text(c: &Client, css: &str) -> Res<String> {
    wait_until(css, Duration::from_secs(20), || async {
        Ok(text_of(c, css).await?.filter(|t| !t.is_empty()))
    })
    .await
}

pub async fn value_of(c: &Client, css: &str) -> Res<String> {
    // Read through script: a <progress>'s value is a number, an <input>'s a string.
    let v = c
        .execute(
            "const e = document.querySelector(arguments[0]); return e ? String(e.value) : null;",
            vec![json!(css)],
        )
        .await?;
    v.as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("no element {css}").into())
}

/// Types into a text field as a user would: select all, then type.
pub async fn type_into(c: &Client, css: &str, text: &str) -> Res<()> {
    let e = c.find(Locator::Css(css)).await?;
    e.clear().await?;
    e.send_keys(text).await?;
    Ok(())
}

pub async fn choose(c: &Client, css: &str, value: &str) -> Res<()> {
    c.find(Locator::Css(css))
        .await?
        .select_by_value(value)
        .await?;
    Ok(())
}

/// The rows of the results table: the level, then `metric=value` of every cell.
pub async fn table_rows(c: &Client) -> Res<Vec<Vec<String>>> {
    let v = c
        .execute(
            "return [...document.querySelectorAll('#results-table tbody tr')].map(tr =>
                [tr.querySelector('th').textContent,
                 ...[...tr.querySelectorAll('td')].map(td => td.dataset.metric + '=' + td.dataset.value)]);",
            vec![],
        )
        .await?;
    Ok(serde_json::from_value(v)?)
}

/// Waits for the run status to start with `prefix` (or with "Failed").
pub async fn wait_status(c: &Client, prefix: &'static str, secs: u64) -> Res<String> {
    wait_until(prefix, Duration::from_secs(secs), || async {
        Ok(text_of(c, "#run-status")
            .await?
            .filter(|t| t.starts_with(prefix) || t.starts_with("Failed")))
    })
    .await
}

/// Clicks Run, waits for Done and returns (status, the page's SweepReport JSON, elapsed ms).
pub async fn run_and_report(c: &Client, secs: u64) -> Res<(String, String, f64)> {
    c.find(Locator::Css("#run-btn")).await?.click().await?;
    let status = wait_status(c, "Done", secs).await?;
    let v = c
        .execute(
            "const s = document.querySelector('#run-status');
             return [document.querySelector('#report-json').textContent, s.dataset.elapsedMs || ''];",
            vec![],
        )
        .await?;
    let (report, ms): (String, String) = serde_json::from_value(v)?;
    Ok((status, report, ms.parse().unwrap_or(f64::NAN)))
}

/// What `servesim sweep --scenario S --json --refine-sla 8` prints for the scenario in a page link: the
/// scenario JSON decoded from the link, then the core's resolve -> run -> SweepReport (the
/// CLI's code path, natively).
pub fn native_report_of_link(link: &str) -> String {
    use servesim_core::scenario::{Scenario, SweepReport};
    let code = link.split("#s=").nth(1).expect("a link with #s=");
    let code = code.split('&').next().unwrap_or(code);
    let json = servesim_core::share::decode(code).expect("the link decodes");
    let s = Scenario::from_json(&json).expect("the link carries a scenario");
    let r = s.resolve().expect("it resolves");
    let mut result = r.run().expect("it runs");
    // The page refines the SLA operating point: `--refine-sla 8`.
    r.refine(&mut result, servesim_web::protocol::REFINE_STEPS)
        .expect("it refines");
    SweepReport::new(&s, &r, &result).to_json_pretty()
}

/// The measured-evidence line the core gives the scenario a page link carries
/// (`ResolvedScenario::evidence`, as `servesim sweep` prints it).
pub fn native_evidence_of_link(link: &str) -> String {
    use servesim_core::scenario::Scenario;
    let code = link.split("#s=").nth(1).expect("a link with #s=");
    let code = code.split('&').next().unwrap_or(code);
    let json = servesim_core::share::decode(code).expect("the link decodes");
    let s = Scenario::from_json(&json).expect("the link carries a scenario");
    s.resolve().expect("it resolves").evidence().summary
}

/// An attribute of the first element matching `css` (None when absent or unset).
pub async fn attr_of(c: &Client, css: &str, name: &str) -> Res<Option<String>> {
    let v = c
        .execute(
            "const e = document.querySelector(arguments[0]); return e ? e.getAttribute(arguments[1]) : null;",
            vec![json!(css), json!(name)],
        )
        .await?;
    Ok(v.as_str().map(str::to_string))
}

/// Waits until the attribute `name` of `css` equals `want`.
pub async fn wait_attr(c: &Client, css: &str, name: &str, want: &str) -> Res<()> {
    wait_until(
        &format!("{css}[{name}={want}]"),
        Duration::from_secs(10),
        || async { Ok((attr_of(c, css, name).await?.as_deref() == Some(want)).then_some(())) },
    )
    .await
}
