"""MiMo's config class for transformers (``model_type: mimo``), apart from the model code so that
registering it with ``AutoConfig`` imports no modeling code (MiMo §2.2: Qwen2 plus
``num_nextn_predict_layers`` MTP layers)."""

from __future__ import annotations

from transformers.models.qwen2.configuration_qwen2 import Qwen2Config

from reasonrl.compat.transformers import finish_registrations, model_class_needed

MODEL_TYPE = "mimo"
ARCHITECTURE = "MiMoForCausalLM"


class MiMoConfig(Qwen2Config):
    model_type = MODEL_TYPE

    def __init__(self, num_nextn_predict_layers: int = 1, **kwargs):
        self.num_nextn_predict_layers = num_nextn_predict_layers
        super().__init__(**kwargs)
        model_class_needed(MODEL_TYPE)  # the bridge registers MiMo's model class by name (compat.transformers)

    def __setstate__(self, state: dict) -> None:  # unpickled (a Ray worker's copy): as built
        self.__dict__.update(state)
        model_class_needed(MODEL_TYPE)


# a lazy registration (reasonrl.compat.transformers) that fired while this module was importing
# transformers' config class waits for this line
finish_registrations(__name__)
