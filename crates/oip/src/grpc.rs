//! The gRPC front: `inference.GRPCInferenceService` as Triton serves it (proto/grpc_service.proto,
//! vendored from Triton; a superset of KServe's service of the same name), the calls of the
//! HTTP front: health, metadata, inference (typed `contents` or `raw_input_contents` in,
//! `raw_output_contents` out, as Triton answers), and Triton's extensions, whose handlers are in
//! [`crate::grpc_triton`]. Errors carry the gRPC code of the HTTP status.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tonic::{Code, Request, Response, Status};
use tvmrt_models::types::DataType;

use crate::codec::{check_size, element_count};
use crate::error::ApiError;
use crate::grpc_triton as triton;
use crate::http::{run_request, server_metadata, App, EXTENSIONS};
use crate::infer::{datatype, InferRequest, RequestedOutput, Tensor};
use crate::load_request;

/// The messages and service generated from the proto by build.rs.
#[allow(missing_docs, clippy::all, rustdoc::all)]
pub mod pb {
    tonic::include_proto!("inference");
}

use pb::grpc_inference_service_server::{GrpcInferenceService, GrpcInferenceServiceServer};
use pb::model_infer_response::InferOutputTensor;
use pb::model_metadata_response::TensorMetadata;
use pb::*;

/// The service, over the handlers' shared state.
pub struct Grpc {
    app: Arc<App>,
}

/// The tonic service for `app`, taking messages up to the request size limit, compressed or
/// not.
pub fn service(app: Arc<App>) -> GrpcInferenceServiceServer<Grpc> {
    let limit = app.limits.max_body;
    // Messages compressed as tritonclient's `compression_algorithm` asks (tonic bounds their
    // decompressed size by the same limit: RESOURCE_EXHAUSTED beyond).
    use tonic::codec::CompressionEncoding::{Deflate, Gzip};
    GrpcInferenceServiceServer::new(Grpc { app })
        .accept_compressed(Gzip)
        .accept_compressed(Deflate)
        .send_compressed(Gzip)
        .send_compressed(Deflate)
        .max_decoding_message_size(limit)
        .max_encoding_message_size(usize::MAX)
}

/// The gRPC status of an HTTP error.
pub fn status(e: ApiError) -> Status {
    let code = match e.status.as_u16() {
        400 => Code::InvalidArgument,
        404 => Code::NotFound,
        408 | 504 => Code::DeadlineExceeded,
        413 | 429 => Code::ResourceExhausted,
        503 => Code::Unavailable,
        _ => Code::Internal,
    };
    Status::new(code, e.message)
}

/// The bytes of typed `contents` of `count` elements of `dtype`.
fn contents_bytes(
    c: &InferTensorContents,
    dtype: DataType,
    count: usize,
) -> Result<Vec<u8>, String> {
    use DataType as D;
    macro_rules! narrow {
        ($src:expr, $t:ty) => {{
            let mut out = Vec::with_capacity($src.len() * size_of::<$t>());
            for (k, &v) in $src.iter().enumerate() {
                let x = <$t>::try_from(v)
                    .map_err(|_| format!("element {k} ({v}) is out of {}'s range", dtype.name()))?;
                out.extend(x.to_le_bytes());
            }
            ($src.len(), out)
        }};
    }
    let (n, bytes) = match dtype {
        D::Bool => (
            c.bool_contents.len(),
            c.bool_contents.iter().map(|&b| u8::from(b)).collect(),
        ),
        D::Int8 => narrow!(c.int_contents, i8),
        D::Int16 => narrow!(c.int_contents, i16),
        D::Int32 => narrow!(c.int_contents, i32),
        D::Int64 => narrow!(c.int64_contents, i64),
        D::Uint8 => narrow!(c.uint_contents, u8),
        D::Uint16 => narrow!(c.uint_contents, u16),
        D::Uint32 => narrow!(c.uint_contents, u32),
        D::Uint64 => narrow!(c.uint64_contents, u64),
        D::Fp32 => narrow!(c.fp32_contents, f32),
        D::Fp64 => narrow!(c.fp64_contents, f64),
        D::Bytes => {
            let mut out = Vec::new();
            for s in &c.bytes_contents {
                out.extend((s.len() as u32).to_le_bytes());
                out.extend(s);
            }
            (c.bytes_contents.len(), out)
        }
        D::Fp16 | D::Bf16 | D::Invalid => {
            return Err(format!(
            "{} tensors come in raw_input_contents (the protocol has no typed contents for them)",
            dtype.name()
        ))
        }
    };
    if n != count {
        return Err(format!("holds {n} elements, its shape has {count}"));
    }
    Ok(bytes)
}

/// The value of a gRPC parameter as text (`Err`: another kind).
fn param_text(p: &InferParameter) -> Result<String, ()> {
    match &p.parameter_choice {
        Some(infer_parameter::ParameterChoice::StringParam(s)) => Ok(s.clone()),
        _ => Err(()),
    }
}

/// The value of a gRPC parameter as a count (`Err`: another kind, or negative).
fn param_number(p: &InferParameter) -> Result<u64, ()> {
    use infer_parameter::ParameterChoice as C;
    match p.parameter_choice {
        Some(C::Int64Param(n)) => u64::try_from(n).map_err(|_| ()),
        Some(C::Uint64Param(n)) => Ok(n),
        _ => Err(()),
    }
}

fn shm_of(
    name: &str,
    parameters: &std::collections::HashMap<String, InferParameter>,
) -> Result<Option<crate::shm::ShmRef>, ApiError> {
    crate::shm::ShmRef::from_parameters(
        name,
        |k| parameters.get(k).map(param_text),
        |k| parameters.get(k).map(param_number),
    )
}

/// Decodes a `ModelInferRequest` (checked for form, as the HTTP front checks JSON).
pub fn decode(req: ModelInferRequest) -> Result<InferRequest, ApiError> {
    let bad = |name: &str, e: String| ApiError::bad_request(format!("input '{name}': {e}"));
    let raw = !req.raw_input_contents.is_empty();
    let mut shm_inputs = Vec::new();
    for input in &req.inputs {
        if let Some(r) = shm_of(&input.name, &input.parameters)? {
            shm_inputs.push((input.name.clone(), r));
        }
    }
    // Inputs in shared memory have no raw contents (as tritonclient sends them).
    let with_data = req.inputs.len() - shm_inputs.len();
    if raw && req.raw_input_contents.len() != with_data {
        return Err(ApiError::bad_request(format!(
            "raw_input_contents holds {} tensors for {with_data} inputs",
            req.raw_input_contents.len(),
        )));
    }
    let mut raws = req.raw_input_contents.into_iter();
    let mut inputs = Vec::with_capacity(req.inputs.len());
    for input in req.inputs {
        let dtype = datatype(&input.datatype, &input.name)?;
        let count = element_count(&input.shape).map_err(|e| bad(&input.name, e))?;
        let in_shm = shm_inputs.iter().any(|(n, _)| *n == input.name);
        let data = match (in_shm, raw, &input.contents) {
            (true, _, _) => Vec::new(),
            (false, true, _) => {
                let bytes = raws.next().expect("counted");
                check_size(&bytes, dtype, count).map_err(|e| bad(&input.name, e))?;
                bytes
            }
            (false, false, Some(c)) => {
                contents_bytes(c, dtype, count).map_err(|e| bad(&input.name, e))?
            }
            (false, false, None) => {
                return Err(bad(
                    &input.name,
                    "has neither contents nor raw_input_contents".into(),
                ))
            }
        };
        inputs.push(Tensor {
            name: input.name,
            datatype: dtype,
            shape: input.shape,
            data,
        });
    }
    let outputs = req
        .outputs
        .into_iter()
        .map(|o| {
            Ok(RequestedOutput {
                shm: shm_of(&o.name, &o.parameters)?,
                name: o.name,
                binary: true,
            })
        })
        .collect::<Result<_, ApiError>>()?;
    Ok(InferRequest {
        id: req.id,
        inputs,
        outputs,
        binary_outputs: true,
        shm_inputs,
    })
}

/// A request's version, `None` when empty (the latest).
pub fn version(v: &str) -> Option<&str> {
    (!v.is_empty()).then_some(v)
}

#[tonic::async_trait]
impl GrpcInferenceService for Grpc {
    async fn server_live(
        &self,
        _: Request<ServerLiveRequest>,
    ) -> Result<Response<ServerLiveResponse>, Status> {
        Ok(Response::new(ServerLiveResponse { live: true }))
    }

    async fn server_ready(
        &self,
        _: Request<ServerReadyRequest>,
    ) -> Result<Response<ServerReadyResponse>, Status> {
        let ready =
            self.app.ready.load(Ordering::Relaxed) && !self.app.stopping.load(Ordering::Relaxed);
        Ok(Response::new(ServerReadyResponse { ready }))
    }

    async fn model_ready(
        &self,
        r: Request<ModelReadyRequest>,
    ) -> Result<Response<ModelReadyResponse>, Status> {
        let r = r.into_inner();
        let ready = self.app.repo.get(&r.name, version(&r.version)).is_ok();
        Ok(Response::new(ModelReadyResponse { ready }))
    }

    async fn server_metadata(
        &self,
        _: Request<ServerMetadataRequest>,
    ) -> Result<Response<ServerMetadataResponse>, Status> {
        let m = server_metadata();
        Ok(Response::new(ServerMetadataResponse {
            name: m["name"].as_str().unwrap_or("tvmrt").into(),
            version: m["version"].as_str().unwrap_or("").into(),
            extensions: EXTENSIONS.iter().map(|e| e.to_string()).collect(),
        }))
    }

    async fn model_metadata(
        &self,
        r: Request<ModelMetadataRequest>,
    ) -> Result<Response<ModelMetadataResponse>, Status> {
        let r = r.into_inner();
        let model = self
            .app
            .repo
            .get(&r.name, version(&r.version))
            .map_err(status)?;
        let [inputs, outputs] = model.tensors().map(|list| {
            list.into_iter()
                .map(|(name, t, shape)| TensorMetadata {
                    name,
                    datatype: t.name().into(),
                    shape,
                })
                .collect()
        });
        Ok(Response::new(ModelMetadataResponse {
            name: model.name.clone(),
            versions: vec![model.version.clone()],
            platform: "tvmrt".into(),
            inputs,
            outputs,
        }))
    }

    async fn model_infer(
        &self,
        r: Request<ModelInferRequest>,
    ) -> Result<Response<ModelInferResponse>, Status> {
        infer(&self.app, r.into_inner()).await.map(Response::new)
    }

    type ModelStreamInferStream = triton::InferStream;

    async fn model_stream_infer(
        &self,
        r: Request<tonic::Streaming<ModelInferRequest>>,
    ) -> Result<Response<Self::ModelStreamInferStream>, Status> {
        Ok(Response::new(triton::stream(
            self.app.clone(),
            r.into_inner(),
        )))
    }

    async fn model_config(
        &self,
        r: Request<ModelConfigRequest>,
    ) -> Result<Response<ModelConfigResponse>, Status> {
        triton::config(&self.app, r.into_inner()).map(Response::new)
    }

    async fn model_statistics(
        &self,
        r: Request<ModelStatisticsRequest>,
    ) -> Result<Response<ModelStatisticsResponse>, Status> {
        triton::statistics(&self.app, r.into_inner()).map(Response::new)
    }

    async fn repository_index(
        &self,
        r: Request<RepositoryIndexRequest>,
    ) -> Result<Response<RepositoryIndexResponse>, Status> {
        Ok(Response::new(triton::index(&self.app, r.into_inner())))
    }

    async fn repository_model_load(
        &self,
        r: Request<RepositoryModelLoadRequest>,
    ) -> Result<Response<RepositoryModelLoadResponse>, Status> {
        let r = r.into_inner();
        let name = triton::model_name(r.model_name, r.repository_name);
        let config = load_request::config_override(&name, triton::load_params(r.parameters))
            .map_err(status)?;
        self.app.repo.load(&name, config).await.map_err(status)?;
        Ok(Response::new(RepositoryModelLoadResponse {}))
    }

    async fn repository_model_unload(
        &self,
        r: Request<RepositoryModelUnloadRequest>,
    ) -> Result<Response<RepositoryModelUnloadResponse>, Status> {
        let r = r.into_inner();
        let name = triton::model_name(r.model_name, r.repository_name);
        self.app.repo.unload(&name).await.map_err(status)?;
        Ok(Response::new(RepositoryModelUnloadResponse {}))
    }

    async fn system_shared_memory_status(
        &self,
        r: Request<SystemSharedMemoryStatusRequest>,
    ) -> Result<Response<SystemSharedMemoryStatusResponse>, Status> {
        triton::shm_status(&self.app, r.into_inner()).map(Response::new)
    }

    async fn system_shared_memory_register(
        &self,
        r: Request<SystemSharedMemoryRegisterRequest>,
    ) -> Result<Response<SystemSharedMemoryRegisterResponse>, Status> {
        triton::shm_register(&self.app, r.into_inner()).map(Response::new)
    }

    async fn system_shared_memory_unregister(
        &self,
        r: Request<SystemSharedMemoryUnregisterRequest>,
    ) -> Result<Response<SystemSharedMemoryUnregisterResponse>, Status> {
        triton::shm_unregister(&self.app, r.into_inner()).map(Response::new)
    }

    async fn cuda_shared_memory_status(
        &self,
        _: Request<CudaSharedMemoryStatusRequest>,
    ) -> Result<Response<CudaSharedMemoryStatusResponse>, Status> {
        Err(triton::unsupported("CUDA shared memory"))
    }

    async fn cuda_shared_memory_register(
        &self,
        _: Request<CudaSharedMemoryRegisterRequest>,
    ) -> Result<Response<CudaSharedMemoryRegisterResponse>, Status> {
        Err(triton::unsupported("CUDA shared memory"))
    }

    async fn cuda_shared_memory_unregister(
        &self,
        _: Request<CudaSharedMemoryUnregisterRequest>,
    ) -> Result<Response<CudaSharedMemoryUnregisterResponse>, Status> {
        Err(triton::unsupported("CUDA shared memory"))
    }

    async fn trace_setting(
        &self,
        r: Request<TraceSettingRequest>,
    ) -> Result<Response<TraceSettingResponse>, Status> {
        triton::trace_setting(&self.app, r.into_inner()).map(Response::new)
    }

    async fn log_settings(
        &self,
        r: Request<LogSettingsRequest>,
    ) -> Result<Response<LogSettingsResponse>, Status> {
        triton::log_settings(r.into_inner()).map(Response::new)
    }
}

fn shm_parameters(r: &crate::shm::ShmRef) -> std::collections::HashMap<String, InferParameter> {
    use infer_parameter::ParameterChoice as C;
    let p = |c| InferParameter {
        parameter_choice: Some(c),
    };
    [
        (
            "shared_memory_region".into(),
            p(C::StringParam(r.region.clone())),
        ),
        (
            "shared_memory_byte_size".into(),
            p(C::Int64Param(r.byte_size as i64)),
        ),
    ]
    .into()
}

/// Runs one `ModelInferRequest` (of a unary call or a stream) to its response.
pub async fn infer(app: &App, r: ModelInferRequest) -> Result<ModelInferResponse, Status> {
    let (name, v) = (r.model_name.clone(), r.model_version.clone());
    // tonic hands the message over whole: its wait and read end where they are seen.
    let trace = app.tracer.start(&name);
    let stamp = |name| crate::trace::stamp(trace.as_ref(), name);
    stamp("GRPC_WAITREAD_START");
    stamp("GRPC_WAITREAD_END");
    let request = decode(r).map_err(status)?;
    let (model, request, outputs) = run_request(app, &name, version(&v), request, trace.as_ref())
        .await
        .map_err(status)?;
    stamp("GRPC_SEND_START");
    let (tensors, raw) = outputs
        .into_iter()
        .map(|t| {
            let shm = request.outputs.iter().find(|o| o.name == t.name);
            let parameters = match shm.and_then(|o| o.shm.as_ref()) {
                // Written to shared memory (crate::shm): its place, and empty raw contents
                // (tritonclient reads the region).
                Some(r) => shm_parameters(r),
                None => Default::default(),
            };
            let meta = InferOutputTensor {
                name: t.name,
                datatype: t.datatype.name().into(),
                shape: t.shape,
                parameters,
                contents: None,
            };
            (meta, t.data)
        })
        .unzip();
    let response = ModelInferResponse {
        model_name: model.name.clone(),
        model_version: model.version.clone(),
        id: request.id,
        parameters: Default::default(),
        outputs: tensors,
        raw_output_contents: raw,
    };
    stamp("GRPC_SEND_END");
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pb::model_infer_request::InferInputTensor;

    fn input(
        name: &str,
        datatype: &str,
        shape: Vec<i64>,
        contents: Option<InferTensorContents>,
    ) -> InferInputTensor {
        InferInputTensor {
            name: name.into(),
            datatype: datatype.into(),
            shape,
            parameters: Default::default(),
            contents,
        }
    }

    #[test]
    fn typed_and_raw_contents_decode_to_the_same_bytes() {
        let typed = ModelInferRequest {
            inputs: vec![input(
                "x",
                "FP32",
                vec![2],
                Some(InferTensorContents {
                    fp32_contents: vec![1.5, -2.0],
                    ..Default::default()
                }),
            )],
            ..Default::default()
        };
        let raw = ModelInferRequest {
            inputs: vec![input("x", "FP32", vec![2], None)],
            raw_input_contents: vec![[1.5f32.to_le_bytes(), (-2.0f32).to_le_bytes()].concat()],
            ..Default::default()
        };
        assert_eq!(decode(typed).unwrap().inputs, decode(raw).unwrap().inputs);
        let ints = ModelInferRequest {
            inputs: vec![input(
                "i",
                "INT8",
                vec![1],
                Some(InferTensorContents {
                    int_contents: vec![-3],
                    ..Default::default()
                }),
            )],
            ..Default::default()
        };
        assert_eq!(decode(ints).unwrap().inputs[0].data, vec![(-3i8) as u8]);
    }

    #[test]
    fn malformed_requests_get_invalid_argument() {
        let e = |r: ModelInferRequest| {
            let s = status(decode(r).unwrap_err());
            assert_eq!(s.code(), Code::InvalidArgument);
            s.message().to_string()
        };
        let out_of_range = ModelInferRequest {
            inputs: vec![input(
                "i",
                "UINT8",
                vec![1],
                Some(InferTensorContents {
                    uint_contents: vec![256],
                    ..Default::default()
                }),
            )],
            ..Default::default()
        };
        assert_eq!(
            e(out_of_range),
            "input 'i': element 0 (256) is out of UINT8's range"
        );
        let short = ModelInferRequest {
            inputs: vec![input("x", "FP32", vec![3], None)],
            raw_input_contents: vec![vec![0; 8]],
            ..Default::default()
        };
        assert_eq!(
            e(short),
            "input 'x': holds 8 bytes, its shape needs 12 (3 elements of 4 bytes)"
        );
        let miscounted = ModelInferRequest {
            inputs: vec![
                input("x", "FP32", vec![1], None),
                input("y", "FP32", vec![1], None),
            ],
            raw_input_contents: vec![vec![0; 4]],
            ..Default::default()
        };
        assert_eq!(
            e(miscounted),
            "raw_input_contents holds 1 tensors for 2 inputs"
        );
        let empty = ModelInferRequest {
            inputs: vec![input(
                "x",
                "FP16",
                vec![1],
                Some(InferTensorContents::default()),
            )],
            ..Default::default()
        };
        assert!(e(empty).contains("FP16 tensors come in raw_input_contents"));
        let no_data = ModelInferRequest {
            inputs: vec![input("x", "FP32", vec![1], None)],
            ..Default::default()
        };
        assert_eq!(
            e(no_data),
            "input 'x': has neither contents nor raw_input_contents"
        );
        assert_eq!(
            status(ApiError::unavailable("full")).code(),
            Code::Unavailable
        );
        assert_eq!(status(ApiError::unknown_model("m")).code(), Code::NotFound);
    }
}
