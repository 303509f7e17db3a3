//! lsr's attention kernels compiled for an H200 without one: each kernel, at the recipe's
//! configuration (head dimension 64, the blocks `launch::blocks` gives an H200: 64 rows a cube,
//! tiles of 64, 16 × 16 units; dropout on) in f32 and bf16,
//! through cubecl's own CUDA path (cubecl-llvm's NVPTX target, the options cubecl-cuda passes
//! for compute capability 9.0 and CUDA 13.0) into PTX, which `ptxas -arch=sm_90a -v` assembles
//! and reports on: registers, stack frame, spills. A kernel that does not compile for CUDA
//! fails the test here, where no test could launch it.
//!
//! The tools (`ptxas`, and `libdevice.10.bc`, which cubecl links `exp` and `ln` from) come from
//! `scripts/cuda/ptx-tools.sh`, named by `LSR_CUDA_TOOLS` (`just test`, `just ptx`).

use std::ffi::CStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use burn_cubecl::cubecl;
use cubecl::ir::{
    DeviceIdentity, ElemType, FloatKind, HardwareProperties, MemoryDeviceProperties,
    features::Features, nvidia::SmArch,
};
use cubecl::prelude::*;
use cubecl_llvm::nvptx::ptx_version::PtxVersion;
use cubecl_llvm::{LlvmTarget, PlironArtifact, PlironCompiler, PlironOptions};
use cubecl_runtime::compiler::Compiler;
use cubecl_runtime::kernel::CubeKernel;

use super::kernels::{ParamsCompilationArg, Shape, forward, key_value_gradient, query_gradient};
use super::launch::blocks;

/// The H200's compute capability, and the CUDA version cudarc is built for.
const SM: u32 = 90;
const CUDA: i32 = 13000;

/// What no kernel here reads (their IR depends on the comptime shape and the dtype alone),
/// filled as cubecl's own offline tests fill it, with the H200's plane and shared memory.
fn device_properties() -> Arc<DeviceProperties> {
    let hardware = HardwareProperties {
        load_width: 128,
        vector_register_count: None,
        plane_size_min: 32,
        plane_size_max: 32,
        max_bindings: 32,
        max_shared_memory_size: 232_448,
        max_cube_count: (u32::MAX, u16::MAX as u32, u16::MAX as u32),
        max_units_per_cube: 1024,
        max_cube_dim: (1024, 1024, 64),
        num_streaming_multiprocessors: None,
        num_tensor_cores: None,
        min_tensor_cores_dim: None,
        num_cpu_cores: None,
        last_level_cache_size: None,
        max_vector_size: VectorSize::MAX,
        cube_mma_reserved_shared_memory: 0,
    };
    Arc::new(DeviceProperties::new(
        Features::default(),
        MemoryDeviceProperties::new(u64::MAX, 256),
        hardware,
        cubecl::profile::TimingMethod::Device,
        DeviceIdentity {
            name: "offline sm_90".to_string(),
            fingerprint: "offline".to_string(),
            physical: None,
        },
    ))
}

fn tensor() -> TensorCompilationArg {
    TensorCompilationArg {
        meta: TensorMetaCompilationArg { len: (), rank: () },
        buffer: BufferCompilationArg { inplace: None },
    }
}

fn params() -> ParamsCompilationArg {
    ParamsCompilationArg {
        scale: (),
        half_window: (),
        threshold: (),
        seed_lo: (),
        seed_hi: (),
        keep_scale: (),
    }
}

/// One kernel as PTX, with the dynamic shared memory its launch asks for.
struct Compiled {
    name: String,
    ptx: String,
    shared_bytes: usize,
}

/// The three kernels in `dtype` at the recipe's configuration (`t` is one tensor argument).
fn kernels(dtype: FloatKind) -> Vec<(&'static str, Box<dyn CubeKernel>)> {
    let props = device_properties();
    let shape = Shape {
        dropped: true,
        ..blocks(&props.hardware, 64).expect("an H200 takes blocks at head dimension 64")
    };
    let elem = ElemType::Float(dtype);
    let settings = || {
        KernelSettings::new(
            *CubeDim::new_1d(shape.units() as u32),
            ExecutionMode::Checked,
            AddressType::U32,
        )
    };
    let target = Arc::new(TargetProperties::default());
    let t = tensor;
    let [q, k, v, bias, dout, stats, delta, grad] = [(); 8].map(|()| t());
    let key_value = key_value_gradient::KeyValueGradient::new(
        settings(),
        props.clone(),
        target.clone(),
        q,
        k,
        v,
        bias,
        dout,
        stats,
        delta,
        grad,
        params(),
        shape,
        elem,
    );
    let [q, k, v, bias, out, stats] = [(); 6].map(|()| t());
    let forward = forward::Forward::new(
        settings(),
        props.clone(),
        target.clone(),
        q,
        k,
        v,
        bias,
        out,
        stats,
        params(),
        shape,
        elem,
    );
    let [q, k, v, bias, out, dout, stats, dq, delta] = [(); 9].map(|()| t());
    let query = query_gradient::QueryGradient::new(
        settings(),
        props.clone(),
        target.clone(),
        q,
        k,
        v,
        bias,
        out,
        dout,
        stats,
        dq,
        delta,
        params(),
        shape,
        elem,
    );
    vec![
        ("forward", Box::new(forward)),
        ("query_gradient", Box::new(query)),
        ("key_value_gradient", Box::new(key_value)),
    ]
}

/// Every kernel in f32 and bf16 as PTX for sm_90a, as cubecl-cuda compiles it at run time.
/// `libdevice.10.bc` is found under `$CUDA_PATH`, which the caller sets.
fn compile_all() -> Result<Vec<Compiled>, String> {
    let options = PlironOptions {
        sm_arch: Some(SmArch::new(SM, true)),
        ptx_version: PtxVersion::for_driver(CUDA),
        grid_constants: true,
        ..Default::default()
    };
    let mut compiler = PlironCompiler {
        target: LlvmTarget::Nvptx,
    };
    let mut compiled = Vec::new();
    for (dtype, suffix) in [(FloatKind::F32, "f32"), (FloatKind::BF16, "bf16")] {
        for (name, kernel) in kernels(dtype) {
            let name = format!("{name}_{suffix}");
            let artifact = compiler
                .compile(kernel.define(), &options)
                .map_err(|error| format!("{name}: {error:?}"))?;
            let PlironArtifact::NvptxCode(module) = artifact else {
                return Err(format!("{name}: the NVPTX target gave no PTX"));
            };
            // SAFETY: cubecl-llvm terminates the module's PTX with a NUL.
            let ptx = unsafe { CStr::from_ptr(module.ptx.as_ptr()) }
                .to_string_lossy()
                .into_owned();
            compiled.push(Compiled {
                name,
                ptx,
                shared_bytes: module.shared_memory_size,
            });
        }
    }
    Ok(compiled)
}

/// What `ptxas -v` says of one kernel.
#[derive(Debug, PartialEq)]
struct Assembled {
    registers: u32,
    stack_bytes: u32,
    spill_stores: u32,
    spill_loads: u32,
}

/// `ptx` assembled for sm_90a by `tools/bin/ptxas`, and its report.
fn assemble(tools: &Path, kernel: &Compiled) -> Result<Assembled, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let source = dir.path().join(format!("{}.ptx", kernel.name));
    lsr_files::atomic::write_bytes(&source, kernel.ptx.as_bytes()).map_err(|e| e.to_string())?;
    let output = std::process::Command::new(tools.join("bin/ptxas"))
        .args(["-arch=sm_90a", "-v", "-o"])
        .arg(dir.path().join("out.cubin"))
        .arg(&source)
        .output()
        .map_err(|e| format!("ptxas: {e}"))?;
    let report = String::from_utf8_lossy(&output.stderr).into_owned();
    if !output.status.success() {
        return Err(format!("{}: ptxas refused it:\n{report}", kernel.name));
    }
    parse_report(&report).ok_or_else(|| format!("{}: no usage line in:\n{report}", kernel.name))
}

/// `... N bytes stack frame, S bytes spill stores, L bytes spill loads` and `Used R registers`.
fn parse_report(report: &str) -> Option<Assembled> {
    let number_before = |text: &str, unit: &str| -> Option<u32> {
        let end = text.find(unit)?;
        text[..end].split_whitespace().last()?.parse().ok()
    };
    Some(Assembled {
        registers: number_before(report.split("Used ").nth(1)?, " registers")?,
        stack_bytes: number_before(report, " bytes stack frame")?,
        spill_stores: number_before(report, " bytes spill stores")?,
        spill_loads: number_before(report, " bytes spill loads")?,
    })
}

/// `LSR_CUDA_TOOLS`, where it holds `bin/ptxas` and `nvvm/libdevice/libdevice.10.bc`.
fn tools() -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os("LSR_CUDA_TOOLS")?);
    let complete =
        dir.join("bin/ptxas").is_file() && dir.join("nvvm/libdevice/libdevice.10.bc").is_file();
    complete.then_some(dir)
}

/// Every kernel compiles for sm_90a and assembles; the table printed is what
/// `docs/perf-gpu.md` records (`just ptx`).
#[test]
fn every_attention_kernel_compiles_and_assembles_for_sm_90() {
    let Some(tools) = tools() else {
        lsr_files::ci::cannot_set_up(
            "ptxas and libdevice: LSR_CUDA_TOOLS does not name scripts/cuda/ptx-tools.sh's directory",
        );
        return;
    };
    // SAFETY: cubecl-llvm reads CUDA_PATH for libdevice; no other thread of this test binary
    // reads or writes it.
    unsafe { std::env::set_var("CUDA_PATH", &tools) };
    let compiled = compile_all().unwrap_or_else(|error| panic!("{error}"));
    println!(
        "| kernel | registers | stack frame B | spill stores B | spill loads B | shared memory B |"
    );
    println!("|---|---|---|---|---|---|");
    for kernel in &compiled {
        assert!(kernel.ptx.contains(".target sm_90a"), "{}", kernel.name);
        let a = assemble(&tools, kernel).unwrap_or_else(|error| panic!("{error}"));
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            kernel.name,
            a.registers,
            a.stack_bytes,
            a.spill_stores,
            a.spill_loads,
            kernel.shared_bytes
        );
    }
}

#[test]
fn ptxas_reports_parse() {
    let report = "ptxas info    : Compiling entry function 'forward' for 'sm_90a'\n\
                  ptxas info    : Function properties for forward\n    \
                  24 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n\
                  ptxas info    : Used 168 registers, used 1 barriers, 592 bytes cmem[0]\n";
    assert_eq!(
        parse_report(report),
        Some(Assembled {
            registers: 168,
            stack_bytes: 24,
            spill_stores: 8,
            spill_loads: 12
        })
    );
}
