"""Message definitions that kafka-python's bundled JSON lacks, written out in our own short notation.

kafka-python ships Kafka's message definitions for the client APIs; it has nothing for KIP-848's
ConsumerGroupHeartbeat / ConsumerGroupDescribe, KIP-714's GetTelemetrySubscriptions / PushTelemetry,
KIP-932's ShareGroupHeartbeat / ShareGroupDescribe (v1, Kafka 4.1+'s stable versions), the share-state RPCs
between a share-partition's leader and its share coordinator (keys 83-87, Kafka 4.2's versions) or for the group
coordinator's records. Kafka's definitions (clients/src/main/resources/common/message and group-coordinator/src/main/resources/
common/message) are the spec these lines follow; they hold only the wire facts a codec needs.

Notation, one field per line, nesting by two spaces:
    Name type versions [nullable=V] [default=D] [tag=N tagged=V] [ignorable]
A message starts with `message Name kind [api=K] valid=V [flexible=V]`; `struct Name` opens a shared
struct of the message above (Kafka's "commonStructs"). Record keys are "data" messages whose only
version is the record type (the key version on the wire).
"""
from __future__ import annotations

_TEXT = """
message ConsumerGroupHeartbeatRequest request api=68 valid=0-1 flexible=0+
  GroupId string 0+
  MemberId string 0+
  MemberEpoch int32 0+
  InstanceId string 0+ nullable=0+ default=null
  RackId string 0+ nullable=0+ default=null
  RebalanceTimeoutMs int32 0+ default=-1
  SubscribedTopicNames []string 0+ nullable=0+ default=null
  SubscribedTopicRegex string 1+ nullable=1+ default=null
  ServerAssignor string 0+ nullable=0+ default=null
  TopicPartitions []TopicPartitions 0+ nullable=0+ default=null
    TopicId uuid 0+
    Partitions []int32 0+

message ConsumerGroupHeartbeatResponse response api=68 valid=0-1 flexible=0+
  ThrottleTimeMs int32 0+
  ErrorCode int16 0+
  ErrorMessage string 0+ nullable=0+ default=null
  MemberId string 0+ nullable=0+ default=null
  MemberEpoch int32 0+
  HeartbeatIntervalMs int32 0+
  Assignment Assignment 0+ nullable=0+ default=null
    TopicPartitions []TopicPartitions 0+
struct TopicPartitions
  TopicId uuid 0+
  Partitions []int32 0+

message ConsumerGroupDescribeRequest request api=69 valid=0-1 flexible=0+
  GroupIds []string 0+
  IncludeAuthorizedOperations bool 0+

message ConsumerGroupDescribeResponse response api=69 valid=0-1 flexible=0+
  ThrottleTimeMs int32 0+
  Groups []DescribedGroup 0+
    ErrorCode int16 0+
    ErrorMessage string 0+ nullable=0+ default=null
    GroupId string 0+
    GroupState string 0+
    GroupEpoch int32 0+
    AssignmentEpoch int32 0+
    AssignorName string 0+
    Members []Member 0+
      MemberId string 0+
      InstanceId string 0+ nullable=0+ default=null
      RackId string 0+ nullable=0+ default=null
      MemberEpoch int32 0+
      ClientId string 0+
      ClientHost string 0+
      SubscribedTopicNames []string 0+
      SubscribedTopicRegex string 0+ nullable=0+ default=null
      Assignment Assignment 0+
      TargetAssignment Assignment 0+
      MemberType int8 1+ default=-1 ignorable
    AuthorizedOperations int32 0+ default=-2147483648
struct TopicPartitions
  TopicId uuid 0+
  TopicName string 0+
  Partitions []int32 0+
struct Assignment
  TopicPartitions []TopicPartitions 0+

message ConsumerGroupMetadataKey data valid=3
  GroupId string 3
message ConsumerGroupMetadataValue data valid=0 flexible=0+
  Epoch int32 0+

message ConsumerGroupPartitionMetadataKey data valid=4
  GroupId string 4
message ConsumerGroupPartitionMetadataValue data valid=0 flexible=0+
  Topics []TopicMetadata 0+
    TopicId uuid 0+
    TopicName string 0+
    NumPartitions int32 0+
    PartitionMetadata []PartitionMetadata 0+
      Partition int32 0+
      Racks []string 0+

message ConsumerGroupMemberMetadataKey data valid=5
  GroupId string 5
  MemberId string 5
message ConsumerGroupMemberMetadataValue data valid=0 flexible=0+
  InstanceId string 0+ nullable=0+
  RackId string 0+ nullable=0+
  ClientId string 0+
  ClientHost string 0+
  SubscribedTopicNames []string 0+
  SubscribedTopicRegex string 0+ nullable=0+
  RebalanceTimeoutMs int32 0+ default=-1
  ServerAssignor string 0+ nullable=0+
  ClassicMemberMetadata ClassicMemberMetadata 0+ nullable=0+ tag=0 tagged=0+
    SessionTimeoutMs int32 0+
    SupportedProtocols []ClassicProtocol 0+
      Name string 0+
      Metadata bytes 0+

message ConsumerGroupTargetAssignmentMetadataKey data valid=6
  GroupId string 6
message ConsumerGroupTargetAssignmentMetadataValue data valid=0 flexible=0+
  AssignmentEpoch int32 0+

message ConsumerGroupTargetAssignmentMemberKey data valid=7
  GroupId string 7
  MemberId string 7
message ConsumerGroupTargetAssignmentMemberValue data valid=0 flexible=0+
  TopicPartitions []TopicPartition 0+
    TopicId uuid 0+
    Partitions []int32 0+

message ConsumerGroupRegularExpressionKey data valid=16
  GroupId string 16
  RegularExpression string 16
message ConsumerGroupRegularExpressionValue data valid=0 flexible=0+
  Topics []string 0+
  Version int64 0+
  Timestamp int64 0+

message ConsumerGroupCurrentMemberAssignmentKey data valid=8
  GroupId string 8
  MemberId string 8
message ConsumerGroupCurrentMemberAssignmentValue data valid=0 flexible=0+
  MemberEpoch int32 0+
  PreviousMemberEpoch int32 0+
  State int8 0+
  AssignedPartitions []TopicPartitions 0+
  PartitionsPendingRevocation []TopicPartitions 0+
struct TopicPartitions
  TopicId uuid 0+
  Partitions []int32 0+
  AssignmentEpochs []int32 0+ nullable=0+ default=null tag=0 tagged=0+

message ShareGroupHeartbeatRequest request api=76 valid=1 flexible=1+
  GroupId string 1+
  MemberId string 1+
  MemberEpoch int32 1+
  RackId string 1+ nullable=1+ default=null
  SubscribedTopicNames []string 1+ nullable=1+ default=null

message ShareGroupHeartbeatResponse response api=76 valid=1 flexible=1+
  ThrottleTimeMs int32 1+
  ErrorCode int16 1+
  ErrorMessage string 1+ nullable=1+ default=null
  MemberId string 1+ nullable=1+ default=null
  MemberEpoch int32 1+
  HeartbeatIntervalMs int32 1+
  Assignment Assignment 1+ nullable=1+ default=null
    TopicPartitions []TopicPartitions 1+
struct TopicPartitions
  TopicId uuid 1+
  Partitions []int32 1+

message ShareGroupDescribeRequest request api=77 valid=1 flexible=1+
  GroupIds []string 1+
  IncludeAuthorizedOperations bool 1+

message ShareGroupDescribeResponse response api=77 valid=1 flexible=1+
  ThrottleTimeMs int32 1+
  Groups []DescribedGroup 1+
    ErrorCode int16 1+
    ErrorMessage string 1+ nullable=1+ default=null
    GroupId string 1+
    GroupState string 1+
    GroupEpoch int32 1+
    AssignmentEpoch int32 1+
    AssignorName string 1+
    Members []Member 1+
      MemberId string 1+
      RackId string 1+ nullable=1+ default=null
      MemberEpoch int32 1+
      ClientId string 1+
      ClientHost string 1+
      SubscribedTopicNames []string 1+
      Assignment Assignment 1+
    AuthorizedOperations int32 1+ default=-2147483648
struct TopicPartitions
  TopicId uuid 1+
  TopicName string 1+
  Partitions []int32 1+
struct Assignment
  TopicPartitions []TopicPartitions 1+

message ShareFetchRequest request api=78 valid=1-2 flexible=1+
  GroupId string 1+ nullable=1+ default=null
  MemberId string 1+ nullable=1+
  ShareSessionEpoch int32 1+
  MaxWaitMs int32 1+
  MinBytes int32 1+
  MaxBytes int32 1+ default=0x7fffffff
  MaxRecords int32 1+
  BatchSize int32 1+
  ShareAcquireMode int8 2+
  IsRenewAck bool 2+
  Topics []FetchTopic 1+
    TopicId uuid 1+
    Partitions []FetchPartition 1+
      PartitionIndex int32 1+
      AcknowledgementBatches []AcknowledgementBatch 1+
        FirstOffset int64 1+
        LastOffset int64 1+
        AcknowledgeTypes []int8 1+
  ForgottenTopicsData []ForgottenTopic 1+
    TopicId uuid 1+
    Partitions []int32 1+

message ShareFetchResponse response api=78 valid=1-2 flexible=1+
  ThrottleTimeMs int32 1+
  ErrorCode int16 1+
  ErrorMessage string 1+ nullable=1+ default=null
  AcquisitionLockTimeoutMs int32 1+
  Responses []ShareFetchableTopicResponse 1+
    TopicId uuid 1+
    Partitions []PartitionData 1+
      PartitionIndex int32 1+
      ErrorCode int16 1+
      ErrorMessage string 1+ nullable=1+ default=null
      AcknowledgeErrorCode int16 1+
      AcknowledgeErrorMessage string 1+ nullable=1+ default=null
      CurrentLeader LeaderIdAndEpoch 1+
        LeaderId int32 1+
        LeaderEpoch int32 1+
      Records records 1+ nullable=1+
      AcquiredRecords []AcquiredRecords 1+
        FirstOffset int64 1+
        LastOffset int64 1+
        DeliveryCount int16 1+
  NodeEndpoints []NodeEndpoint 1+
    NodeId int32 1+
    Host string 1+
    Port int32 1+
    Rack string 1+ nullable=1+ default=null

message ShareAcknowledgeRequest request api=79 valid=1-2 flexible=1+
  GroupId string 1+ nullable=1+ default=null
  MemberId string 1+ nullable=1+
  ShareSessionEpoch int32 1+
  IsRenewAck bool 2+
  Topics []AcknowledgeTopic 1+
    TopicId uuid 1+
    Partitions []AcknowledgePartition 1+
      PartitionIndex int32 1+
      AcknowledgementBatches []AcknowledgementBatch 1+
        FirstOffset int64 1+
        LastOffset int64 1+
        AcknowledgeTypes []int8 1+

message ShareAcknowledgeResponse response api=79 valid=1-2 flexible=1+
  ThrottleTimeMs int32 1+
  ErrorCode int16 1+
  ErrorMessage string 1+ nullable=1+ default=null
  AcquisitionLockTimeoutMs int32 2+
  Responses []ShareAcknowledgeTopicResponse 1+
    TopicId uuid 1+
    Partitions []PartitionData 1+
      PartitionIndex int32 1+
      ErrorCode int16 1+
      ErrorMessage string 1+ nullable=1+ default=null
      CurrentLeader LeaderIdAndEpoch 1+
        LeaderId int32 1+
        LeaderEpoch int32 1+
  NodeEndpoints []NodeEndpoint 1+
    NodeId int32 1+
    Host string 1+
    Port int32 1+
    Rack string 1+ nullable=1+ default=null

message DescribeShareGroupOffsetsRequest request api=90 valid=0-1 flexible=0+
  Groups []DescribeShareGroupOffsetsRequestGroup 0+
    GroupId string 0+
    Topics []DescribeShareGroupOffsetsRequestTopic 0+ nullable=0+
      TopicName string 0+
      Partitions []int32 0+

message DescribeShareGroupOffsetsResponse response api=90 valid=0-1 flexible=0+
  ThrottleTimeMs int32 0+
  Groups []DescribeShareGroupOffsetsResponseGroup 0+
    GroupId string 0+
    Topics []DescribeShareGroupOffsetsResponseTopic 0+
      TopicName string 0+
      TopicId uuid 0+
      Partitions []DescribeShareGroupOffsetsResponsePartition 0+
        PartitionIndex int32 0+
        StartOffset int64 0+
        LeaderEpoch int32 0+
        Lag int64 1+ default=-1
        ErrorCode int16 0+
        ErrorMessage string 0+ nullable=0+ default=null
    ErrorCode int16 0+
    ErrorMessage string 0+ nullable=0+ default=null

message AlterShareGroupOffsetsRequest request api=91 valid=0 flexible=0+
  GroupId string 0+
  Topics []AlterShareGroupOffsetsRequestTopic 0+
    TopicName string 0+
    Partitions []AlterShareGroupOffsetsRequestPartition 0+
      PartitionIndex int32 0+
      StartOffset int64 0+

message AlterShareGroupOffsetsResponse response api=91 valid=0 flexible=0+
  ThrottleTimeMs int32 0+
  ErrorCode int16 0+
  ErrorMessage string 0+ nullable=0+ default=null
  Responses []AlterShareGroupOffsetsResponseTopic 0+
    TopicName string 0+
    TopicId uuid 0+
    Partitions []AlterShareGroupOffsetsResponsePartition 0+
      PartitionIndex int32 0+
      ErrorCode int16 0+
      ErrorMessage string 0+ nullable=0+ default=null

message DeleteShareGroupOffsetsRequest request api=92 valid=0 flexible=0+
  GroupId string 0+
  Topics []DeleteShareGroupOffsetsRequestTopic 0+
    TopicName string 0+

message DeleteShareGroupOffsetsResponse response api=92 valid=0 flexible=0+
  ThrottleTimeMs int32 0+
  ErrorCode int16 0+
  ErrorMessage string 0+ nullable=0+ default=null
  Responses []DeleteShareGroupOffsetsResponseTopic 0+
    TopicName string 0+
    TopicId uuid 0+
    ErrorCode int16 0+
    ErrorMessage string 0+ nullable=0+ default=null

message ShareGroupMemberMetadataKey data valid=10
  GroupId string 10
  MemberId string 10
message ShareGroupMemberMetadataValue data valid=0 flexible=0+
  RackId string 0+ nullable=0+
  ClientId string 0+
  ClientHost string 0+
  SubscribedTopicNames []string 0+

message ShareGroupMetadataKey data valid=11
  GroupId string 11
message ShareGroupMetadataValue data valid=0 flexible=0+
  Epoch int32 0+

message ShareGroupTargetAssignmentMetadataKey data valid=12
  GroupId string 12
message ShareGroupTargetAssignmentMetadataValue data valid=0 flexible=0+
  AssignmentEpoch int32 0+

message ShareGroupTargetAssignmentMemberKey data valid=13
  GroupId string 13
  MemberId string 13
message ShareGroupTargetAssignmentMemberValue data valid=0 flexible=0+
  TopicPartitions []TopicPartition 0+
    TopicId uuid 0+
    Partitions []int32 0+

message ShareGroupCurrentMemberAssignmentKey data valid=14
  GroupId string 14
  MemberId string 14
message ShareGroupCurrentMemberAssignmentValue data valid=0 flexible=0+
  MemberEpoch int32 0+
  PreviousMemberEpoch int32 0+
  State int8 0+
  AssignedPartitions []TopicPartitions 0+
struct TopicPartitions
  TopicId uuid 0+
  Partitions []int32 0+

message GetTelemetrySubscriptionsRequest request api=71 valid=0 flexible=0+
  ClientInstanceId uuid 0+

message GetTelemetrySubscriptionsResponse response api=71 valid=0 flexible=0+
  ThrottleTimeMs int32 0+
  ErrorCode int16 0+
  ClientInstanceId uuid 0+
  SubscriptionId int32 0+
  AcceptedCompressionTypes []int8 0+
  PushIntervalMs int32 0+
  TelemetryMaxBytes int32 0+
  DeltaTemporality bool 0+
  RequestedMetrics []string 0+

message PushTelemetryRequest request api=72 valid=0 flexible=0+
  ClientInstanceId uuid 0+
  SubscriptionId int32 0+
  Terminating bool 0+
  CompressionType int8 0+
  Metrics bytes 0+

message PushTelemetryResponse response api=72 valid=0 flexible=0+
  ThrottleTimeMs int32 0+
  ErrorCode int16 0+

message ShareSnapshotKey data valid=0
  GroupId string 0
  TopicId uuid 0
  Partition int32 0
message ShareSnapshotValue data valid=0 flexible=0+
  SnapshotEpoch int32 0+
  StateEpoch int32 0+
  LeaderEpoch int32 0+
  StartOffset int64 0+
  DeliveryCompleteCount int32 0+ default=-1 tag=0 tagged=0+
  CreateTimestamp int64 0+
  WriteTimestamp int64 0+
  StateBatches []StateBatch 0+
    FirstOffset int64 0+
    LastOffset int64 0+
    DeliveryState int8 0+
    DeliveryCount int16 0+

message ShareUpdateKey data valid=1
  GroupId string 1
  TopicId uuid 1
  Partition int32 1
message ShareUpdateValue data valid=0 flexible=0+
  SnapshotEpoch int32 0+
  LeaderEpoch int32 0+
  StartOffset int64 0+
  DeliveryCompleteCount int32 0+ default=-1 tag=0 tagged=0+
  StateBatches []StateBatch 0+
    FirstOffset int64 0+
    LastOffset int64 0+
    DeliveryState int8 0+
    DeliveryCount int16 0+

message InitializeShareGroupStateRequest request api=83 valid=0 flexible=0+
  GroupId string 0+
  Topics []InitializeStateData 0+
    TopicId uuid 0+
    Partitions []PartitionData 0+
      Partition int32 0+
      StateEpoch int32 0+
      StartOffset int64 0+

message InitializeShareGroupStateResponse response api=83 valid=0 flexible=0+
  Results []InitializeStateResult 0+
    TopicId uuid 0+
    Partitions []PartitionResult 0+
      Partition int32 0+
      ErrorCode int16 0+
      ErrorMessage string 0+ nullable=0+ default=null

message ReadShareGroupStateRequest request api=84 valid=0 flexible=0+
  GroupId string 0+
  Topics []ReadStateData 0+
    TopicId uuid 0+
    Partitions []PartitionData 0+
      Partition int32 0+
      LeaderEpoch int32 0+

message ReadShareGroupStateResponse response api=84 valid=0 flexible=0+
  Results []ReadStateResult 0+
    TopicId uuid 0+
    Partitions []PartitionResult 0+
      Partition int32 0+
      ErrorCode int16 0+
      ErrorMessage string 0+ nullable=0+ default=null
      StateEpoch int32 0+
      StartOffset int64 0+
      StateBatches []StateBatch 0+
        FirstOffset int64 0+
        LastOffset int64 0+
        DeliveryState int8 0+
        DeliveryCount int16 0+

message WriteShareGroupStateRequest request api=85 valid=0-1 flexible=0+
  GroupId string 0+
  Topics []WriteStateData 0+
    TopicId uuid 0+
    Partitions []PartitionData 0+
      Partition int32 0+
      StateEpoch int32 0+
      LeaderEpoch int32 0+
      StartOffset int64 0+
      DeliveryCompleteCount int32 1+ default=-1
      StateBatches []StateBatch 0+
        FirstOffset int64 0+
        LastOffset int64 0+
        DeliveryState int8 0+
        DeliveryCount int16 0+

message WriteShareGroupStateResponse response api=85 valid=0-1 flexible=0+
  Results []WriteStateResult 0+
    TopicId uuid 0+
    Partitions []PartitionResult 0+
      Partition int32 0+
      ErrorCode int16 0+
      ErrorMessage string 0+ nullable=0+ default=null

message DeleteShareGroupStateRequest request api=86 valid=0 flexible=0+
  GroupId string 0+
  Topics []DeleteStateData 0+
    TopicId uuid 0+
    Partitions []PartitionData 0+
      Partition int32 0+

message DeleteShareGroupStateResponse response api=86 valid=0 flexible=0+
  Results []DeleteStateResult 0+
    TopicId uuid 0+
    Partitions []PartitionResult 0+
      Partition int32 0+
      ErrorCode int16 0+
      ErrorMessage string 0+ nullable=0+ default=null

message ReadShareGroupStateSummaryRequest request api=87 valid=0-1 flexible=0+
  GroupId string 0+
  Topics []ReadStateSummaryData 0+
    TopicId uuid 0+
    Partitions []PartitionData 0+
      Partition int32 0+
      LeaderEpoch int32 0+

message ReadShareGroupStateSummaryResponse response api=87 valid=0-1 flexible=0+
  Results []ReadStateSummaryResult 0+
    TopicId uuid 0+
    Partitions []PartitionResult 0+
      Partition int32 0+
      ErrorCode int16 0+
      ErrorMessage string 0+ nullable=0+ default=null
      StateEpoch int32 0+
      LeaderEpoch int32 0+
      StartOffset int64 0+
      DeliveryCompleteCount int32 1+ default=-1

"""

_RENAMES = {"nullable": "nullableVersions", "tagged": "taggedVersions", "tag": "tag", "default": "default"}


def _field(words: list[str]) -> dict:
    name, ftype, versions, *options = words
    raw: dict = {"name": name, "type": ftype, "versions": versions}
    for option in options:
        key, _, value = option.partition("=")
        if key == "ignorable":
            raw["ignorable"] = True
        elif key == "tag":
            raw["tag"] = int(value)
        else:
            raw[_RENAMES[key]] = value
    return raw


def _parse(text: str) -> dict[str, dict]:
    """Each message as the dict shape of Kafka's JSON, which kcoord.protocol.schema.load_spec reads."""
    messages: dict[str, dict] = {}
    message: dict | None = None
    stack: list[tuple[int, list]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        words = line.split()
        if words[0] == "message":
            name, kind, *options = words[1:]
            message = {"name": name, "type": kind, "fields": [], "commonStructs": []}
            for option in options:
                key, _, value = option.partition("=")
                message[{"api": "apiKey", "valid": "validVersions", "flexible": "flexibleVersions"}[key]] = (
                    int(value) if key == "api" else value)
            messages[name] = message
            stack = [(2, message["fields"])]
        elif words[0] == "struct":
            struct = {"name": words[1], "versions": "0+", "fields": []}
            message["commonStructs"].append(struct)
            stack = [(2, struct["fields"])]
        else:
            # stack: (indent of the children, their list), innermost last
            while stack[-1][0] > indent:
                stack.pop()
            if stack[-1][0] != indent:
                raise ValueError(f"bad indent in definition line {line!r}")
            raw = _field(words)
            stack[-1][1].append(raw)
            stack.append((indent + 2, raw.setdefault("fields", [])))
    for message in messages.values():
        _drop_empty(message["fields"])
        for struct in message["commonStructs"]:
            _drop_empty(struct["fields"])
    return messages


def _drop_empty(fields: list[dict]) -> None:
    for raw in fields:
        if raw["fields"]:
            _drop_empty(raw["fields"])
        else:
            del raw["fields"]


DEFINITIONS = _parse(_TEXT)
