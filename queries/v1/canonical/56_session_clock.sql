-- @staging raw_session
-- @defines session_clock

-- nsysql canonical schema v1: where the export's clock starts in UTC.

-- One row when the export says when its session started (TARGET_INFO_SESSION_START_TIME), else none. Every
-- timestamp of the export counts ns from its session's time zero, and each nsys process has its own zero: the
-- exports of ranks profiled by one nsys each are put on one clock by adding utc_epoch_ns (as far as the hosts'
-- clocks agree).
CREATE OR REPLACE TABLE session_clock AS
SELECT
  -- UTC time of the export's time zero, ns since 1970
  min(utcEpochNs) AS utc_epoch_ns
FROM raw_session
HAVING count(utcEpochNs) > 0;
