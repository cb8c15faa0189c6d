//! Thin wrappers over the browser APIs the page uses (wasm32 only): the URL fragment and history,
//! localStorage, the clipboard, file downloads and the sweep worker.

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{Blob, BlobPropertyBag, HtmlAnchorElement, Url, Window, Worker};

pub fn window() -> Window {
    web_sys::window().expect("the page runs in a window")
}

/// The fragment without `#` ("" when none).
pub fn hash() -> String {
    window()
        .location()
        .hash()
        .unwrap_or_default()
        .trim_start_matches('#')
        .to_string()
}

/// The page's URL without its fragment.
pub fn base_url() -> String {
    let href = window().location().href().unwrap_or_default();
    match href.split_once('#') {
        Some((b, _)) => b.to_string(),
        None => href,
    }
}

/// Sets the fragment to `#<frag>` as a new history entry (`push`) or in place.
pub fn set_hash(frag: &str, push: bool) {
    let Ok(history) = window().history() else {
        return;
    };
    let url = format!("#{frag}");
    let r = if push {
        history.push_state_with_url(&JsValue::NULL, "", Some(&url))
    } else {
        history.replace_state_with_url(&JsValue::NULL, "", Some(&url))
    };
    if r.is_err() {
        web_sys::console::warn_1(&"could not update the URL fragment".into());
    }
}

/// Milliseconds since page load (for debouncing history entries and timing).
pub fn now_ms() -> f64 {
    window().performance().map(|p| p.now()).unwrap_or(0.0)
}

pub fn storage_get(key: &str) -> Option<String> {
    window().local_storage().ok()??.get_item(key).ok()?
}

pub fn storage_set(key: &str, value: &str) {
    if let Ok(Some(s)) = window().local_storage() {
        let _ = s.set_item(key, value);
    }
}

/// Copies text to the clipboard; resolves to false when the browser refuses.
pub async fn copy_text(text: &str) -> bool {
    let clipboard = window().navigator().clipboard();
    wasm_bindgen_futures::JsFuture::from(clipboard.write_text(text))
        .await
        .is_ok()
}

fn click_download(url: &str, filename: &str) {
    let doc = window().document().expect("document");
    let Ok(a) = doc.create_element("a") else {
        return;
    };
    let a: HtmlAnchorElement = a.unchecked_into();
    a.set_href(url);
    a.set_download(filename);
    a.click();
}

/// Offers `text` as a file download.
pub fn download_text(text: &str, filename: &str, mime: &str) {
    let parts = js_sys::Array::of1(&JsValue::from_str(text));
    let opts = BlobPropertyBag::new();
    opts.set_type(mime);
    let Ok(blob) = Blob::new_with_str_sequence_and_options(&parts, &opts) else {
        return;
    };
    let Ok(url) = Url::create_object_url_with_blob(&blob) else {
        return;
    };
    click_download(&url, filename);
    let _ = Url::revoke_object_url(&url);
}

/// Offers a canvas's pixels as a PNG download.
pub fn download_canvas_png(canvas: &web_sys::HtmlCanvasElement, filename: &str) {
    if let Ok(url) = canvas.to_data_url_with_type("image/png") {
        click_download(&url, filename);
    }
}

/// True when the user's system prefers a dark theme.
pub fn prefers_dark() -> bool {
    window()
        .match_media("(prefers-color-scheme: dark)")
        .ok()
        .flatten()
        .map(|m| m.matches())
        .unwrap_or(false)
}

/// Sets `data-theme` on `<html>` ("light", "dark", or removed for "auto").
pub fn apply_theme(choice: &str) {
    if let Some(el) = window().document().and_then(|d| d.document_element()) {
        let _ = match choice {
            "light" | "dark" => el.set_attribute("data-theme", choice),
            _ => el.remove_attribute("data-theme"),
        };
    }
}

/// Starts the sweep worker from the loader Trunk writes next to the page.
pub fn spawn_worker() -> Result<Worker, String> {
    Worker::new("./worker_loader.js")
        .map_err(|e| format!("could not start the sweep worker: {e:?}"))
}
