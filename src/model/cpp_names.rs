//! C++ function names as `stacks="all"` records them (full signatures:
//! `at::native::gather_backward(at::Tensor const&, long, ...)`), and what they say: the
//! function without its arguments and return type, the autograd node it applies, the ATen
//! operator it dispatches.

/// The function of a C++ signature without return type, argument list, qualifiers and
/// compiler suffixes: `void at::cuda::blas::gemm<float>(char, ...) const [clone .constprop.0]`
/// → `at::cuda::blas::gemm<float>`. `(anonymous namespace)` components stay; `operator()`
/// keeps its parentheses. A name without an argument list is returned as is.
pub fn short_name(sig: &str) -> &str {
    let sig = sig.trim();
    let bytes = sig.as_bytes();
    let mut angle = 0i32;
    let mut i = 0;
    let mut start = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'<' => angle += 1,
            b'>' if angle > 0 => angle -= 1,
            // A space at depth 0 before the arguments ends a return type (`void f(...)`);
            // ` [clone ...]` is a suffix, not a name.
            b' ' if angle == 0 && !sig[i..].starts_with(" [clone") => start = i + 1,
            b'(' if angle == 0 => {
                if sig[i..].starts_with("(anonymous namespace)") {
                    i += "(anonymous namespace)".len();
                    continue;
                }
                if sig[start..i].ends_with("operator") && sig[i..].starts_with("()") {
                    return &sig[start..i + 2];
                }
                return &sig[start..i];
            }
            _ => {}
        }
        i += 1;
    }
    &sig[start..]
}

/// The autograd node whose `apply` a frame is: `MmBackward0` for
/// `torch::autograd::generated::MmBackward0::apply(...)`, `AccumulateGrad`, `PyNode` (a
/// custom `torch.autograd.Function`), `CppNode` (a C++ one).
pub fn autograd_node(sig: &str) -> Option<&str> {
    let f = short_name(sig);
    let owner = f
        .strip_prefix("torch::autograd::")?
        .strip_suffix("::apply")?;
    let last = last_component(owner);
    let node = last.split('<').next().unwrap_or(last);
    (!node.is_empty() && node != "Node").then_some(node)
}

/// The autograd engine's own work on gradients between nodes, named like a node: the sum of
/// two gradients of one tensor (`InputBuffer::add`), a gradient summed to its input's shape
/// (`InputMetadata::reduce_grad`), a gradient cast to its input's dtype or device
/// (`validate_outputs`).
pub fn engine_step(sig: &str) -> Option<&'static str> {
    let f = short_name(sig);
    if f.starts_with("torch::autograd::InputBuffer::add") {
        Some("InputBuffer::add")
    } else if f.starts_with("torch::autograd::InputMetadata::reduce_grad") {
        Some("InputMetadata::reduce_grad")
    } else if f.starts_with("torch::autograd::validate_outputs") {
        Some("validate_outputs")
    } else {
        None
    }
}

/// The ATen operator an `at::_ops::NAME::call` or `::redispatch` frame dispatches (`NAME`:
/// the operator and its overload joined by `_`, `div_Tensor`).
pub fn aten_op(sig: &str) -> Option<&str> {
    let f = short_name(sig);
    let rest = f.strip_prefix("at::_ops::")?;
    rest.strip_suffix("::call")
        .or_else(|| rest.strip_suffix("::redispatch"))
        .filter(|op| !op.is_empty() && !op.contains("::"))
}

/// The last `::` component of a name, templates kept whole (`CppNode<a::B>` of
/// `torch::autograd::CppNode<a::B>`).
fn last_component(name: &str) -> &str {
    let bytes = name.as_bytes();
    let mut angle = 0i32;
    let mut cut = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'<' => angle += 1,
            b'>' if angle > 0 => angle -= 1,
            b':' if angle == 0 && bytes.get(i + 1) == Some(&b':') => {
                cut = i + 2;
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    &name[cut..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names() {
        assert_eq!(
            short_name("at::native::gather_backward(at::Tensor const&, at::Tensor const&, long, at::Tensor const&, bool)"),
            "at::native::gather_backward"
        );
        assert_eq!(
            short_name("void at::cuda::blas::gemm_internal_cublas<float, float>(char, char, long)"),
            "at::cuda::blas::gemm_internal_cublas<float, float>"
        );
        assert_eq!(
            short_name("at::TensorBase at::detail::_empty_generic<long>(c10::ArrayRef<long>, c10::Allocator*)"),
            "at::detail::_empty_generic<long>"
        );
        assert_eq!(
            short_name("torch::cuda::(anonymous namespace)::gather_with_cpp()"),
            "torch::cuda::(anonymous namespace)::gather_with_cpp"
        );
        assert_eq!(
            short_name("at::empty(c10::ArrayRef<long>, c10::TensorOptions) [clone .constprop.0]"),
            "at::empty"
        );
        assert_eq!(
            short_name("torch::autograd::Node::operator()(std::vector<at::Tensor>&&)"),
            "torch::autograd::Node::operator()"
        );
        assert_eq!(
            short_name("std::error_code::default_error_condition() const"),
            "std::error_code::default_error_condition"
        );
        assert_eq!(
            short_name("_PyEval_EvalFrameDefault"),
            "_PyEval_EvalFrameDefault"
        );
        assert_eq!(short_name("??"), "??");
    }

    #[test]
    fn nodes_and_ops() {
        assert_eq!(
            autograd_node("torch::autograd::generated::IndexBackward0::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)"),
            Some("IndexBackward0")
        );
        assert_eq!(
            autograd_node("torch::autograd::AccumulateGrad::apply(std::vector<at::Tensor>&&)"),
            Some("AccumulateGrad")
        );
        assert_eq!(
            autograd_node("torch::autograd::CppNode<my::Fn>::apply(std::vector<at::Tensor>&&)"),
            Some("CppNode")
        );
        assert_eq!(
            autograd_node("torch::autograd::Node::operator()(std::vector<at::Tensor>&&)"),
            None
        );
        assert_eq!(
            autograd_node("torch::autograd::generated::MeanBackward0_apply_functional(std::vector<at::Tensor>&&)"),
            None
        );
        assert_eq!(autograd_node("at::native::mm(at::Tensor const&)"), None);
        assert_eq!(
            aten_op("at::_ops::div_Tensor::call(at::Tensor const&, at::Tensor const&)"),
            Some("div_Tensor")
        );
        assert_eq!(
            aten_op("at::_ops::mm::redispatch(c10::DispatchKeySet, at::Tensor const&)"),
            Some("mm")
        );
        assert_eq!(aten_op("at::native::mm(at::Tensor const&)"), None);
    }
}
