//! The guide's Rust example (docs/rust-go-java.md quotes the body of `rust_api_example`, so
//! what a reader copies is what this test compiles and runs): tvmrt's own Rust API loads a
//! library TVM 0.27 exported (`tests/fixtures/add_dyn.so`: `add(A, B, C)`, C = A + B) and
//! calls its function on CPU tensors, no C library involved.

#[test]
fn rust_api_example() -> tvmrt::Result<()> {
    use tvmrt::dtype::dtypes::FLOAT32;
    use tvmrt::tensor::Tensor;
    use tvmrt::{device::cpu, module::load_from_file, Any};

    let module = load_from_file("tests/fixtures/add_dyn.so", "")?;
    let add = module
        .get_function("add", false)?
        .expect("`add` is exported");
    // float32 tensors on the CPU, filled from host values
    let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>();
    let tensor = |v: &[f32]| -> tvmrt::Result<Tensor> {
        let t = Tensor::empty(&[v.len() as i64], FLOAT32, cpu())?;
        t.copy_from_bytes(&bytes(v))?;
        Ok(t)
    };
    let a = tensor(&[1., 2., 3.])?;
    let b = tensor(&[10., 20., 30.])?;
    let c = tensor(&[0.; 3])?;
    add.call_values(&[Any::from(a), Any::from(b), Any::from(c.clone())])?;
    assert_eq!(c.to_vec()?, bytes(&[11., 22., 33.]));
    Ok(())
}
