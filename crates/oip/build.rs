//! Generates the gRPC service (`inference.GRPCInferenceService`, Triton's superset of KServe's
//! Open Inference Protocol) from the vendored proto/grpc_service.proto and model_config.proto:
//! protox compiles them (pure Rust, no protoc), tonic-prost-build writes the messages and the
//! server trait (no client), and the compiled descriptors are kept in OUT_DIR/descriptors.bin
//! for src/protojson.rs (JSON to message, as Triton's HTTP and gRPC answers mirror each other).

use prost::Message;

fn main() {
    let protos = ["proto/grpc_service.proto", "proto/model_config.proto"];
    for p in protos {
        println!("cargo:rerun-if-changed={p}");
    }
    let files = protox::compile(["proto/grpc_service.proto"], ["proto"])
        .expect("compiling grpc_service.proto");
    let out = std::env::var("OUT_DIR").expect("OUT_DIR");
    // The descriptors without the protos' comments (source_code_info): 147 KB less in the
    // binary, and JSON reading needs none of them.
    let mut bare = files.clone();
    for f in &mut bare.file {
        f.source_code_info = None;
    }
    std::fs::write(format!("{out}/descriptors.bin"), bare.encode_to_vec())
        .expect("writing descriptors.bin");
    tonic_prost_build::configure()
        .build_client(false)
        .build_transport(false)
        .compile_fds(files)
        .expect("generating the gRPC service");
}
