"""`msir.dataset` (`import msir.dataset as ds`): MindSpore's data pipeline.

Sources (`msir.dataset.sources`): `NumpySlicesDataset`, `GeneratorDataset`,
`MnistDataset`; operations and iterators (`msir.dataset.engine`):
`.shuffle`, `.batch`, `.map`, `.repeat`, `create_tuple_iterator`,
`create_dict_iterator`, read ahead on a background thread; transforms
(`msir.dataset.vision`, `msir.dataset.transforms`); settings
(`msir.dataset.config`: `set_seed`, `set_prefetch_size`). Only NumPy is
imported: the compiler is not loaded by a data pipeline.
"""

from msir.dataset import config, transforms, vision
from msir.dataset.engine import Dataset, DictIterator, TupleIterator
from msir.dataset.sources import GeneratorDataset, MnistDataset, NumpySlicesDataset

__all__ = ["Dataset", "DictIterator", "GeneratorDataset", "MnistDataset", "NumpySlicesDataset", "TupleIterator",
           "config", "transforms", "vision"]
