"""protocol/message_types.pyi (what type checkers see of the generated message classes) is current."""
from kcoord.protocol import messages as m
from kcoord.protocol.stubgen import STUB_PATH, stub_source


def test_the_checked_in_declarations_are_what_stubgen_writes():
    assert STUB_PATH.read_text(encoding="utf-8") == stub_source(), \
        "run `python -m kcoord.protocol.stubgen` and commit protocol/message_types.pyi"


def test_declarations_name_the_run_time_classes_and_fields():
    source = stub_source()
    assert "class ProduceRequest:" in source and "    TopicProduceData = _ProduceRequest__TopicProduceData" in source
    assert "    topic_data: list[_ProduceRequest__TopicProduceData]" in source
    R = m.ProduceRequest  # the same names at run time
    assert R.TopicProduceData.PartitionProduceData is R.PartitionProduceData
    assert "partition_data" in R.TopicProduceData.__slots__
