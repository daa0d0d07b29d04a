//! The models, each a struct of `tch` layers with `new(&nn::Path, ..)` and
//! `ModuleT::forward_t`: logistic regression and an MLP (tests), a LeNet-style
//! CNN and a small ResNet for 28x28 images (the CPU stand-ins), the CIFAR
//! ResNets of He et al. 2016 (3 stages of 16/32/64 channels, option-A
//! shortcuts: subsample and zero-pad), and VGG16 with batch norm.

use tch::Tensor;
use tch::nn::{self, ModuleT};

use crate::TrainerError;

/// The shape of the inputs and the number of classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageShape {
    pub channels: i64,
    pub height: i64,
    pub width: i64,
    pub classes: i64,
}

impl ImageShape {
    /// Fashion-MNIST: 1x28x28, 10 classes.
    pub const FASHION_MNIST: Self = Self {
        channels: 1,
        height: 28,
        width: 28,
        classes: 10,
    };
    /// CIFAR-10: 3x32x32, 10 classes.
    pub const CIFAR10: Self = Self {
        channels: 3,
        height: 32,
        width: 32,
        classes: 10,
    };
}

/// Which model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelSpec {
    Logistic,
    Mlp {
        hidden: i64,
    },
    LeNet,
    /// CIFAR-style ResNet of `depth = 6 n + 2` layers (20, 32, 44, 56, 110; 8
    /// is the small one for CPU runs).
    ResNet {
        depth: i64,
    },
    Vgg16Bn,
}

impl ModelSpec {
    /// Parses `logistic`, `mlp` (128 wide) or `mlp<width>` (`mlp1280`: a
    /// million parameters on Fashion-MNIST), `lenet`, `resnet8` ..
    /// `resnet110`, `vgg16`.
    pub fn parse(name: &str) -> Result<Self, TrainerError> {
        Ok(match name {
            "logistic" => ModelSpec::Logistic,
            "mlp" => ModelSpec::Mlp { hidden: 128 },
            "lenet" => ModelSpec::LeNet,
            "vgg16" | "vgg16bn" | "vgg16-bn" => ModelSpec::Vgg16Bn,
            _ if repro_runlog::mlp_width(name).is_some() => ModelSpec::Mlp {
                hidden: repro_runlog::mlp_width(name).unwrap_or(128) as i64,
            },
            _ => match name
                .strip_prefix("resnet")
                .and_then(|d| d.parse::<i64>().ok())
            {
                Some(depth) if depth >= 8 && (depth - 2) % 6 == 0 => ModelSpec::ResNet { depth },
                _ => {
                    return Err(TrainerError::UnknownModel {
                        name: name.to_string(),
                    });
                }
            },
        })
    }

    /// Builds the model's layers under `vs`.
    pub fn build(&self, vs: &nn::Path<'_>, shape: ImageShape) -> Box<dyn ModuleT> {
        match *self {
            ModelSpec::Logistic => Box::new(Mlp::new(vs, shape, None)),
            ModelSpec::Mlp { hidden } => Box::new(Mlp::new(vs, shape, Some(hidden))),
            ModelSpec::LeNet => Box::new(LeNet::new(vs, shape)),
            ModelSpec::ResNet { depth } => Box::new(ResNet::new(vs, shape, depth)),
            ModelSpec::Vgg16Bn => Box::new(Vgg::new(vs, shape, &VGG16)),
        }
    }
}

/// Logistic regression (no hidden layer) or a one-hidden-layer MLP.
#[derive(Debug)]
pub struct Mlp {
    hidden: Option<nn::Linear>,
    out: nn::Linear,
}

impl Mlp {
    pub fn new(vs: &nn::Path<'_>, shape: ImageShape, hidden: Option<i64>) -> Self {
        let inputs = shape.channels * shape.height * shape.width;
        let (hidden, last) = match hidden {
            Some(h) => (
                Some(nn::linear(vs / "hidden", inputs, h, Default::default())),
                h,
            ),
            None => (None, inputs),
        };
        Self {
            hidden,
            out: nn::linear(vs / "out", last, shape.classes, Default::default()),
        }
    }
}

impl ModuleT for Mlp {
    fn forward_t(&self, xs: &Tensor, _train: bool) -> Tensor {
        let xs = xs.flat_view();
        let xs = match &self.hidden {
            Some(h) => xs.apply(h).relu(),
            None => xs,
        };
        xs.apply(&self.out)
    }
}

/// LeNet-5 style: two 5x5 convolutions with max pooling, three linear layers.
/// 28x28 inputs are padded by 2 in the first convolution (as MNIST LeNets do).
#[derive(Debug)]
pub struct LeNet {
    conv1: nn::Conv2D,
    conv2: nn::Conv2D,
    fc1: nn::Linear,
    fc2: nn::Linear,
    fc3: nn::Linear,
}

impl LeNet {
    pub fn new(vs: &nn::Path<'_>, shape: ImageShape) -> Self {
        let pad = ((32 - shape.height) / 2).max(0);
        let c1 = nn::ConvConfig {
            padding: pad,
            ..Default::default()
        };
        // (h + 2 pad - 4) / 2 after conv1 and pool, (.. - 4) / 2 after conv2 and pool
        let h = ((shape.height + 2 * pad - 4) / 2 - 4) / 2;
        let w = ((shape.width + 2 * pad - 4) / 2 - 4) / 2;
        Self {
            conv1: nn::conv2d(vs / "conv1", shape.channels, 6, 5, c1),
            conv2: nn::conv2d(vs / "conv2", 6, 16, 5, Default::default()),
            fc1: nn::linear(vs / "fc1", 16 * h * w, 120, Default::default()),
            fc2: nn::linear(vs / "fc2", 120, 84, Default::default()),
            fc3: nn::linear(vs / "fc3", 84, shape.classes, Default::default()),
        }
    }
}

impl ModuleT for LeNet {
    fn forward_t(&self, xs: &Tensor, _train: bool) -> Tensor {
        xs.apply(&self.conv1)
            .relu()
            .max_pool2d_default(2)
            .apply(&self.conv2)
            .relu()
            .max_pool2d_default(2)
            .flat_view()
            .apply(&self.fc1)
            .relu()
            .apply(&self.fc2)
            .relu()
            .apply(&self.fc3)
    }
}

fn conv3x3(vs: nn::Path<'_>, i: i64, o: i64, stride: i64) -> nn::Conv2D {
    let cfg = nn::ConvConfig {
        stride,
        padding: 1,
        bias: false,
        ..Default::default()
    };
    nn::conv2d(vs, i, o, 3, cfg)
}

/// A basic residual block with an option-A shortcut.
#[derive(Debug)]
struct BasicBlock {
    conv1: nn::Conv2D,
    bn1: nn::BatchNorm,
    conv2: nn::Conv2D,
    bn2: nn::BatchNorm,
    stride: i64,
    /// Channels the shortcut zero-pads on each side.
    pad: i64,
}

impl BasicBlock {
    fn new(vs: &nn::Path<'_>, i: i64, o: i64, stride: i64) -> Self {
        Self {
            conv1: conv3x3(vs / "conv1", i, o, stride),
            bn1: nn::batch_norm2d(vs / "bn1", o, Default::default()),
            conv2: conv3x3(vs / "conv2", o, o, 1),
            bn2: nn::batch_norm2d(vs / "bn2", o, Default::default()),
            stride,
            pad: (o - i) / 2,
        }
    }
}

impl ModuleT for BasicBlock {
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let out = xs
            .apply(&self.conv1)
            .apply_t(&self.bn1, train)
            .relu()
            .apply(&self.conv2)
            .apply_t(&self.bn2, train);
        let shortcut = if self.stride != 1 || self.pad != 0 {
            xs.slice(2, 0, None, self.stride)
                .slice(3, 0, None, self.stride)
                .constant_pad_nd([0, 0, 0, 0, self.pad, self.pad])
        } else {
            xs.shallow_clone()
        };
        (out + shortcut).relu()
    }
}

/// The CIFAR ResNet of He et al. 2016, Section 4.2.
#[derive(Debug)]
pub struct ResNet {
    conv: nn::Conv2D,
    bn: nn::BatchNorm,
    blocks: Vec<BasicBlock>,
    fc: nn::Linear,
}

impl ResNet {
    /// `depth = 6 n + 2`.
    pub fn new(vs: &nn::Path<'_>, shape: ImageShape, depth: i64) -> Self {
        let n = (depth - 2) / 6;
        let mut blocks = Vec::new();
        let mut channels = 16;
        for (stage, width) in [16i64, 32, 64].into_iter().enumerate() {
            for b in 0..n {
                let stride = if stage > 0 && b == 0 { 2 } else { 1 };
                blocks.push(BasicBlock::new(
                    &(vs / format!("layer{}", stage + 1) / b),
                    channels,
                    width,
                    stride,
                ));
                channels = width;
            }
        }
        Self {
            conv: conv3x3(vs / "conv1", shape.channels, 16, 1),
            bn: nn::batch_norm2d(vs / "bn1", 16, Default::default()),
            blocks,
            fc: nn::linear(vs / "fc", 64, shape.classes, Default::default()),
        }
    }
}

impl ModuleT for ResNet {
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let mut x = xs.apply(&self.conv).apply_t(&self.bn, train).relu();
        for block in &self.blocks {
            x = block.forward_t(&x, train);
        }
        x.adaptive_avg_pool2d([1, 1]).flat_view().apply(&self.fc)
    }
}

/// VGG16's convolution widths; 0 is a 2x2 max pool.
const VGG16: [i64; 18] = [
    64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0,
];

/// VGG with batch norm for 32x32 inputs, one linear classifier (the common
/// CIFAR form).
#[derive(Debug)]
pub struct Vgg {
    layers: Vec<Option<(nn::Conv2D, nn::BatchNorm)>>,
    fc: nn::Linear,
}

impl Vgg {
    pub fn new(vs: &nn::Path<'_>, shape: ImageShape, cfg: &[i64]) -> Self {
        let mut channels = shape.channels;
        let mut side = shape.height.min(shape.width);
        let layers = cfg
            .iter()
            .enumerate()
            .map(|(i, &width)| {
                if width == 0 {
                    side /= 2;
                    return None;
                }
                let conv_cfg = nn::ConvConfig {
                    padding: 1,
                    ..Default::default()
                };
                let layer = (
                    nn::conv2d(vs / format!("conv{i}"), channels, width, 3, conv_cfg),
                    nn::batch_norm2d(vs / format!("bn{i}"), width, Default::default()),
                );
                channels = width;
                Some(layer)
            })
            .collect();
        Self {
            layers,
            fc: nn::linear(
                vs / "fc",
                channels * side.max(1) * side.max(1),
                shape.classes,
                Default::default(),
            ),
        }
    }
}

impl ModuleT for Vgg {
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let mut x = xs.shallow_clone();
        for layer in &self.layers {
            x = match layer {
                Some((conv, bn)) => x.apply(conv).apply_t(bn, train).relu(),
                None => x.max_pool2d_default(2),
            };
        }
        x.flat_view().apply(&self.fc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FlatParams;
    use tch::{Device, Kind, nn::VarStore};

    fn params(spec: ModelSpec, shape: ImageShape) -> (usize, Vec<i64>) {
        let vs = VarStore::new(Device::Cpu);
        let model = spec.build(&vs.root(), shape);
        let x = Tensor::zeros(
            [2, shape.channels, shape.height, shape.width],
            (Kind::Float, Device::Cpu),
        );
        let y = tch::no_grad(|| model.forward_t(&x, false));
        (FlatParams::new(&vs).unwrap().len(), y.size())
    }

    /// `6 n + 2` layers, option A: the closed form of the trainable parameters.
    fn resnet_params(depth: usize, classes: usize) -> usize {
        let n = (depth - 2) / 6;
        let block = |i: usize, o: usize| 9 * i * o + 9 * o * o + 4 * o;
        let stages = n * block(16, 16)
            + block(16, 32)
            + (n - 1) * block(32, 32)
            + block(32, 64)
            + (n - 1) * block(64, 64);
        9 * 3 * 16 + 2 * 16 + stages + 64 * classes + classes
    }

    #[test]
    fn resnet_parameter_counts_match_he_et_al() {
        // 0.27M and 1.7M in He et al. 2016, Table 6
        assert_eq!(resnet_params(20, 10), 269_722);
        assert_eq!(resnet_params(110, 10), 1_727_962);
        for depth in [20usize, 32] {
            let (count, out) = params(
                ModelSpec::ResNet {
                    depth: depth as i64,
                },
                ImageShape::CIFAR10,
            );
            assert_eq!(count, resnet_params(depth, 10), "resnet{depth}");
            assert_eq!(out, vec![2, 10]);
        }
    }

    /// The driver sizes networks from `repro_runlog::MODEL_PARAMETERS`:
    /// every entry is what the built model has.
    #[test]
    fn the_shared_parameter_counts_are_the_models() {
        for (name, dataset, count) in repro_runlog::MODEL_PARAMETERS {
            let shape = if dataset == "cifar10" {
                ImageShape::CIFAR10
            } else {
                ImageShape::FASHION_MNIST
            };
            let (built, _) = params(ModelSpec::parse(name).unwrap(), shape);
            assert_eq!(built as u64, count, "{name} on {dataset}");
        }
        // a width of its own: counted by the formula
        for (name, shape, dataset) in [
            ("mlp1280", ImageShape::FASHION_MNIST, "fashion-mnist"),
            ("mlp7", ImageShape::CIFAR10, "cifar10"),
        ] {
            let (built, _) = params(ModelSpec::parse(name).unwrap(), shape);
            assert_eq!(
                Some(built as u64),
                repro_runlog::model_parameters(name, dataset),
                "{name}"
            );
        }
        assert_eq!(
            repro_runlog::model_parameters("mlp1280", "fashion-mnist"),
            Some(1_017_610)
        );
        for bad in ["mlp0", "mlp012", "mlpx", "mlp-3"] {
            assert!(ModelSpec::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_model_runs_on_its_inputs() {
        for (spec, shape) in [
            (ModelSpec::Logistic, ImageShape::FASHION_MNIST),
            (ModelSpec::Mlp { hidden: 32 }, ImageShape::FASHION_MNIST),
            (ModelSpec::LeNet, ImageShape::FASHION_MNIST),
            (ModelSpec::LeNet, ImageShape::CIFAR10),
            (ModelSpec::ResNet { depth: 8 }, ImageShape::FASHION_MNIST),
            (ModelSpec::Vgg16Bn, ImageShape::CIFAR10),
        ] {
            let (count, out) = params(spec, shape);
            assert_eq!(out, vec![2, 10], "{spec:?}");
            assert!(count > 0);
        }
        assert_eq!(
            params(ModelSpec::Logistic, ImageShape::FASHION_MNIST).0,
            784 * 10 + 10
        );
        assert_eq!(
            params(ModelSpec::LeNet, ImageShape::FASHION_MNIST).0,
            61_706
        );
    }

    #[test]
    fn names_parse() {
        assert_eq!(
            ModelSpec::parse("resnet110").unwrap(),
            ModelSpec::ResNet { depth: 110 }
        );
        assert_eq!(ModelSpec::parse("vgg16").unwrap(), ModelSpec::Vgg16Bn);
        assert!(ModelSpec::parse("resnet21").is_err());
        assert!(
            ModelSpec::parse("gpt")
                .unwrap_err()
                .to_string()
                .contains("gpt")
        );
    }

    #[test]
    fn a_few_steps_of_sgd_lower_the_loss() {
        tch::manual_seed(0);
        let vs = VarStore::new(Device::Cpu);
        let model = ModelSpec::LeNet.build(&vs.root(), ImageShape::FASHION_MNIST);
        let x = Tensor::randn([16, 1, 28, 28], (Kind::Float, Device::Cpu));
        let y = Tensor::from_slice(&[0i64, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 5]);
        let mut opt = nn::Sgd::default().build(&vs, 0.05).unwrap();
        use tch::nn::OptimizerConfig;
        let first = model
            .forward_t(&x, true)
            .cross_entropy_for_logits(&y)
            .double_value(&[]);
        for _ in 0..30 {
            let loss = model.forward_t(&x, true).cross_entropy_for_logits(&y);
            opt.backward_step(&loss);
        }
        let last = model
            .forward_t(&x, true)
            .cross_entropy_for_logits(&y)
            .double_value(&[]);
        assert!(last < 0.5 * first, "{first} -> {last}");
    }
}
