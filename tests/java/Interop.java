// Runs MirrorMaker 2's own record classes for mirrorlib's interop test.
// Lives in MM2's package so it can call the package-private methods MM2 itself uses to write
// records (recordKey/recordValue). Reads commands from stdin, one per line, tab-separated:
//   enc-checkpoint group topic partition upstream downstream metadata -> "key-hex\tvalue-hex"
//   enc-heartbeat source target timestamp                            -> "key-hex\tvalue-hex"
//   enc-offset-sync topic partition upstream downstream               -> "key-hex\tvalue-hex"
//   dec-checkpoint|dec-heartbeat|dec-offset-sync key-hex value-hex    -> fields, tab-separated
// String arguments are hex-encoded UTF-8 so any text survives the trip.
package org.apache.kafka.connect.mirror;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;

public class Interop {
    private static final HexFormat HEX = HexFormat.of();

    private static String str(String hex) {
        return new String(HEX.parseHex(hex), StandardCharsets.UTF_8);
    }

    private static String hexStr(String s) {
        return HEX.formatHex(s.getBytes(StandardCharsets.UTF_8));
    }

    private static ConsumerRecord<byte[], byte[]> record(String keyHex, String valueHex) {
        return new ConsumerRecord<>("t", 0, 0L, HEX.parseHex(keyHex), HEX.parseHex(valueHex));
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) continue;
            String[] f = line.split("\t", -1);
            String out;
            try {
                switch (f[0]) {
                    case "enc-checkpoint": {
                        Checkpoint c = new Checkpoint(str(f[1]), new TopicPartition(str(f[2]), Integer.parseInt(f[3])),
                            Long.parseLong(f[4]), Long.parseLong(f[5]), str(f[6]));
                        out = HEX.formatHex(c.recordKey()) + "\t" + HEX.formatHex(c.recordValue());
                        break;
                    }
                    case "enc-heartbeat": {
                        Heartbeat h = new Heartbeat(str(f[1]), str(f[2]), Long.parseLong(f[3]));
                        out = HEX.formatHex(h.recordKey()) + "\t" + HEX.formatHex(h.recordValue());
                        break;
                    }
                    case "enc-offset-sync": {
                        OffsetSync s = new OffsetSync(new TopicPartition(str(f[1]), Integer.parseInt(f[2])),
                            Long.parseLong(f[3]), Long.parseLong(f[4]));
                        out = HEX.formatHex(s.recordKey()) + "\t" + HEX.formatHex(s.recordValue());
                        break;
                    }
                    case "dec-checkpoint": {
                        Checkpoint c = Checkpoint.deserializeRecord(record(f[1], f[2]));
                        out = hexStr(c.consumerGroupId()) + "\t" + hexStr(c.topicPartition().topic()) + "\t"
                            + c.topicPartition().partition() + "\t" + c.upstreamOffset() + "\t"
                            + c.downstreamOffset() + "\t" + hexStr(c.metadata());
                        break;
                    }
                    case "dec-heartbeat": {
                        Heartbeat h = Heartbeat.deserializeRecord(record(f[1], f[2]));
                        out = hexStr(h.sourceClusterAlias()) + "\t" + hexStr(h.targetClusterAlias()) + "\t"
                            + h.timestamp();
                        break;
                    }
                    case "dec-offset-sync": {
                        OffsetSync s = OffsetSync.deserializeRecord(record(f[1], f[2]));
                        out = hexStr(s.topicPartition().topic()) + "\t" + s.topicPartition().partition() + "\t"
                            + s.upstreamOffset() + "\t" + s.downstreamOffset();
                        break;
                    }
                    default:
                        out = "ERROR\tunknown command " + f[0];
                }
            } catch (RuntimeException e) {
                out = "ERROR\t" + e.getClass().getSimpleName() + ": " + e.getMessage();
            }
            System.out.println(out);
        }
    }
}
