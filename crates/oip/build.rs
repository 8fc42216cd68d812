//! Generates the gRPC service of KServe's Open Inference Protocol (`inference.GRPCInferenceService`)
//! from the vendored proto/grpc_predict_v2.proto: protox compiles it (pure Rust, no protoc),
//! tonic-prost-build writes the messages and the server trait (no client).

fn main() {
    let proto = "proto/grpc_predict_v2.proto";
    println!("cargo:rerun-if-changed={proto}");
    let files = protox::compile([proto], ["proto"]).expect("compiling grpc_predict_v2.proto");
    tonic_prost_build::configure()
        .build_client(false)
        .build_transport(false)
        .compile_fds(files)
        .expect("generating the gRPC service");
}
