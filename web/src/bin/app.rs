//! The page (main thread; Trunk builds it with `data-type="main"`).

#[cfg(target_arch = "wasm32")]
fn main() {
    servesim_web::app::start();
}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    eprintln!("servesim-web's page runs in the browser only: ./scripts/serve.sh (see docs/web.md)");
}
