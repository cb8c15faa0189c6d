//! The sweep worker (a dedicated Web Worker; Trunk builds it with `data-type="worker"`).

#[cfg(target_arch = "wasm32")]
fn main() {
    servesim_web::worker::start();
}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    eprintln!("servesim-web's worker runs in the browser only (see docs/web.md)");
}
