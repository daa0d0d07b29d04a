//! The models' trainable parameter counts, which the driver sizes network
//! conditions from without building a model.

/// Trainable parameters of every model the trainer builds, on each input
/// shape (`fashion-mnist` stands for its 1x28x28 images, `synthetic`
/// included; `cifar10` for 3x32x32; VGG16 pools 28x28 images to nothing,
/// so it runs on CIFAR-10 only): what the driver sizes a network
/// condition by without building a model. The trainer's tests check every
/// entry against the model it builds.
pub const MODEL_PARAMETERS: [(&str, &str, u64); 21] = [
    ("logistic", "fashion-mnist", 7_850),
    ("logistic", "cifar10", 30_730),
    ("mlp", "fashion-mnist", 101_770),
    ("mlp", "cifar10", 394_634),
    ("lenet", "fashion-mnist", 61_706),
    ("lenet", "cifar10", 62_006),
    ("resnet8", "fashion-mnist", 75_002),
    ("resnet8", "cifar10", 75_290),
    ("resnet14", "fashion-mnist", 172_218),
    ("resnet14", "cifar10", 172_506),
    ("resnet20", "fashion-mnist", 269_434),
    ("resnet20", "cifar10", 269_722),
    ("resnet32", "fashion-mnist", 463_866),
    ("resnet32", "cifar10", 464_154),
    ("resnet44", "fashion-mnist", 658_298),
    ("resnet44", "cifar10", 658_586),
    ("resnet56", "fashion-mnist", 852_730),
    ("resnet56", "cifar10", 853_018),
    ("resnet110", "fashion-mnist", 1_727_674),
    ("resnet110", "cifar10", 1_727_962),
    ("vgg16", "cifar10", 14_728_266),
];

/// The classes of a data set the trainer reads: Fashion-MNIST, CIFAR-10
/// and the synthetic images all have 10.
pub fn classes(dataset: &str) -> Option<u32> {
    matches!(dataset, "fashion-mnist" | "cifar10" | "synthetic").then_some(10)
}

/// The parameters of `model` on `dataset`'s images ([`MODEL_PARAMETERS`];
/// `mlp<width>`, a hidden layer of that width, by its formula).
pub fn model_parameters(model: &str, dataset: &str) -> Option<u64> {
    let model = match model {
        "vgg16bn" | "vgg16-bn" => "vgg16",
        m => m,
    };
    let shape = if dataset == "cifar10" {
        "cifar10"
    } else {
        "fashion-mnist"
    };
    if let Some(width) = mlp_width(model) {
        let inputs: u64 = if shape == "cifar10" {
            3 * 32 * 32
        } else {
            28 * 28
        };
        return Some((inputs + 1) * width + (width + 1) * 10);
    }
    MODEL_PARAMETERS
        .iter()
        .find(|(m, d, _)| *m == model && *d == shape)
        .map(|e| e.2)
}

/// The hidden width of `mlp<width>` (`mlp1280`), a positive number
/// without leading zeros; `None` for any other name (plain `mlp` is 128,
/// in [`MODEL_PARAMETERS`]).
pub fn mlp_width(model: &str) -> Option<u64> {
    let digits = model.strip_prefix("mlp")?;
    if digits.starts_with('0') {
        return None;
    }
    digits
        .parse::<u64>()
        .ok()
        .filter(|&w| w > 0 && w <= 1 << 20)
}
