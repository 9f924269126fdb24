import torch.nn as nn
import no_such_kernel_library  # noqa: F401


class ModelNew(nn.Module):
    pass
