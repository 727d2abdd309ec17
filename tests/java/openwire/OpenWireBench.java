import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import javax.jms.Connection;
import javax.jms.DeliveryMode;
import javax.jms.Message;
import javax.jms.MessageConsumer;
import javax.jms.MessageProducer;
import javax.jms.Session;
import javax.jms.TextMessage;

import org.apache.activemq.ActiveMQConnectionFactory;

/**
 * OpenWire load generator for bench/openwire_throughput.py: one JVM, one producer thread and one
 * consumer thread over the real ActiveMQ Classic JMS client, each on its own connection, one
 * queue, TextMessages.
 *
 * <p>Arguments: URL QUEUE MESSAGES SIZE MODE RATE TIMEOUT_S. MODE is
 * {@code sync-persistent} (PERSISTENT, {@code jms.useAsyncSend=false}: every send waits for the
 * broker's Response, which a broker gives once the message is on disk), {@code async-persistent}
 * (PERSISTENT, {@code jms.useAsyncSend=true}: the client does not wait) or
 * {@code non-persistent} (NON_PERSISTENT, which the client sends without waiting). The mode's
 * {@code jms.useAsyncSend} is added to the URL here. RATE 0 sends flat out; RATE &gt; 0 paces
 * the producer at RATE msg/s. Every message carries the long property {@code bench_ts}
 * (System.nanoTime at send, one JVM so one clock) and the int {@code bench_seq}; the consumer
 * (AUTO_ACKNOWLEDGE, the client's default prefetch of 1000) records receipt time minus
 * bench_ts. The consumer exists before the first send. Bounded: the run gives up after
 * TIMEOUT_S seconds (exit 3). With both connections up it prints {@code {"ready": true}} and
 * waits for a line on stdin before the first send, so that the caller can sample the broker's
 * CPU around the run.
 *
 * <p>Prints one JSON line: messages, elapsed_s (first send to last receipt), msgs_per_s, p50_ms,
 * p99_ms, received, duplicates and client_cpu_s (this JVM's CPU time over the run), or
 * {"error": ...}.
 */
public final class OpenWireBench {
    private OpenWireBench() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 7) {
            System.out.println("{\"error\": \"usage: URL QUEUE MESSAGES SIZE MODE RATE TIMEOUT_S\"}");
            System.exit(2);
        }
        final String queueName = args[1];
        final int n = Integer.parseInt(args[2]);
        final int size = Integer.parseInt(args[3]);
        final String mode = args[4];
        final double rate = Double.parseDouble(args[5]);
        final long deadline = System.nanoTime() + (long) (Double.parseDouble(args[6]) * 1e9);
        final boolean persistent = !mode.equals("non-persistent");
        final boolean async = !mode.equals("sync-persistent");
        if (!mode.equals("non-persistent") && !mode.equals("sync-persistent") && !mode.equals("async-persistent")) {
            System.out.println("{\"error\": \"bad mode " + mode + "\"}");
            System.exit(2);
        }
        final String url = args[0] + (args[0].contains("?") ? "&" : "?") + "jms.useAsyncSend=" + async;

        ActiveMQConnectionFactory factory = new ActiveMQConnectionFactory(url);
        final long[] latency = new long[n];
        final boolean[] seen = new boolean[n];
        final AtomicLong lastReceipt = new AtomicLong();
        final AtomicReference<Throwable> failure = new AtomicReference<>();
        final long[] counts = new long[2]; // received, duplicates
        final com.sun.management.OperatingSystemMXBean os =
                (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        // JMS 1.1: a Connection is not AutoCloseable
        final Connection consConn = factory.createConnection();
        final Connection prodConn = factory.createConnection();
        try {
            Session cs = consConn.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageConsumer consumer = cs.createConsumer(cs.createQueue(queueName));
            consConn.start();
            Thread consumerThread = new Thread(() -> {
                try {
                    while (counts[0] < n && System.nanoTime() < deadline) {
                        Message m = consumer.receive(100);
                        if (m == null) {
                            continue;
                        }
                        long now = System.nanoTime();
                        int seq = m.getIntProperty("bench_seq");
                        if (seq < 0 || seq >= n || seen[seq]) {
                            counts[1]++;
                            continue;
                        }
                        seen[seq] = true;
                        latency[(int) counts[0]] = now - m.getLongProperty("bench_ts");
                        counts[0]++;
                        lastReceipt.set(now);
                    }
                } catch (Throwable t) {
                    failure.compareAndSet(null, t);
                }
            }, "bench-consumer");

            Session ps = prodConn.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageProducer producer = ps.createProducer(ps.createQueue(queueName));
            producer.setDeliveryMode(persistent ? DeliveryMode.PERSISTENT : DeliveryMode.NON_PERSISTENT);
            char[] chars = new char[size];
            Arrays.fill(chars, 'x');
            final String body = new String(chars);
            consumerThread.start();
            System.out.println("{\"ready\": true}");
            System.out.flush();
            new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
            long cpu0 = os.getProcessCpuTime();
            long t0 = System.nanoTime();
            double interval = rate > 0 ? 1e9 / rate : 0;
            for (int i = 0; i < n; i++) {
                if (failure.get() != null || System.nanoTime() > deadline) {
                    break;
                }
                if (interval > 0) {
                    long due = t0 + (long) (i * interval);
                    long wait;
                    while ((wait = due - System.nanoTime()) > 0) {
                        if (wait > 200_000) {
                            Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
                        } else {
                            Thread.onSpinWait();
                        }
                    }
                }
                TextMessage m = ps.createTextMessage(body);
                m.setIntProperty("bench_seq", i);
                m.setLongProperty("bench_ts", System.nanoTime());
                producer.send(m);
            }
            consumerThread.join(Math.max(1, (deadline - System.nanoTime()) / 1_000_000));
            long cpu1 = os.getProcessCpuTime();
            Throwable t = failure.get();
            if (t != null || counts[0] < n) {
                String why = t != null ? t.toString() : "timed out with " + counts[0] + " of " + n + " received";
                System.out.println("{\"error\": \"" + why.replace("\\", "\\\\").replace("\"", "'") + "\"}");
                System.out.flush();
                consumerThread.interrupt();
                System.exit(3);
            }
            long[] lat = Arrays.copyOf(latency, n);
            Arrays.sort(lat);
            double elapsed = (lastReceipt.get() - t0) / 1e9;
            System.out.println(String.format(Locale.ROOT,
                    "{\"messages\": %d, \"elapsed_s\": %.6f, \"msgs_per_s\": %.1f, \"p50_ms\": %.3f, "
                            + "\"p99_ms\": %.3f, \"received\": %d, \"duplicates\": %d, \"client_cpu_s\": %.6f}",
                    n, elapsed, n / elapsed, lat[(int) ((n - 1) * 0.50)] / 1e6, lat[(int) ((n - 1) * 0.99)] / 1e6,
                    counts[0], counts[1], (cpu1 - cpu0) / 1e9));
            System.out.flush();
        } finally {
            prodConn.close();
            consConn.close();
        }
    }
}
