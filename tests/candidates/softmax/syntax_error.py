import torch.nn as nn

class ModelNew(nn.Module)
    pass
