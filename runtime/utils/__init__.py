"""llgrad.utils, as torch.utils: `data` (datasets, samplers, DataLoader)."""
from llgrad.runtime.utils import data  # noqa: F401
