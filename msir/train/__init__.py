"""`msir.train`: MindSpore's training layer (`mindspore.train`): `Model`, the callbacks and the metrics.

`Model` (`msir.train.model`) trains, evaluates and predicts; the callbacks
(`msir.train.callback`: `Callback`, `RunContext`, `LossMonitor`,
`TimeMonitor`; `msir.train.progress`: `ProgressBar`;
`msir.train.summary_collector`: `SummaryCollector`) watch a run; the
metrics `Accuracy`, `Loss`, `Metric` are `msir.nn.metrics`' (MindSpore has
them in both namespaces).
"""

from msir.nn.metrics import Accuracy, Loss, Metric
from msir.train.callback import Callback, LossMonitor, RunContext, TimeMonitor
from msir.train.model import Model
from msir.train.progress import ProgressBar
from msir.train.summary_collector import SummaryCollector

__all__ = ["Accuracy", "Callback", "Loss", "LossMonitor", "Metric", "Model", "ProgressBar", "RunContext",
           "SummaryCollector", "TimeMonitor"]
