"""`msir.train`: MindSpore's training layer (`mindspore.train`): `Model`, the callbacks and the metrics.

`Model` (`msir.train.model`) trains, evaluates and predicts; the callbacks
(`msir.train.callback`: `Callback`, `RunContext`, `LossMonitor`,
`TimeMonitor`; `ModelCheckpoint` with its `CheckpointConfig`, in
`msir.train.checkpoint_callback`; `msir.train.progress`: `ProgressBar`;
`msir.train.summary_collector`: `SummaryCollector`) watch a run; checkpoints
in MindSpore's `.ckpt` format are `msir.train.serialization`'s
(`save_checkpoint`, `load_checkpoint`, `load_param_into_net`, also
`msir.`'s); the metrics `Accuracy`, `Loss`, `Metric` are `msir.nn.metrics`'
(MindSpore has them in both namespaces).
"""

from msir.nn.metrics import Accuracy, Loss, Metric
from msir.train.callback import Callback, LossMonitor, RunContext, TimeMonitor
from msir.train.checkpoint_callback import CheckpointConfig, ModelCheckpoint
from msir.train.model import Model
from msir.train.progress import ProgressBar
from msir.train.serialization import load_checkpoint, load_param_into_net, save_checkpoint
from msir.train.summary_collector import SummaryCollector

__all__ = ["Accuracy", "Callback", "CheckpointConfig", "Loss", "LossMonitor", "Metric", "Model", "ModelCheckpoint",
           "ProgressBar", "RunContext", "SummaryCollector", "TimeMonitor", "load_checkpoint", "load_param_into_net",
           "save_checkpoint"]
