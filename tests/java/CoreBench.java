import java.util.Arrays;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import javax.jms.BytesMessage;
import javax.jms.CompletionListener;
import javax.jms.Connection;
import javax.jms.DeliveryMode;
import javax.jms.Message;
import javax.jms.MessageConsumer;
import javax.jms.MessageProducer;
import javax.jms.Queue;
import javax.jms.Session;

import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;

/**
 * CORE load generator for bench/core_throughput.py: one JVM, one producer thread and one
 * consumer thread over the real Artemis JMS client, each on its own connection, one queue.
 *
 * <p>Arguments: URL QUEUE MESSAGES SIZE MODE RATE TIMEOUT_S [WINDOW]. MODE is
 * {@code durable-blocking} (PERSISTENT, the client's default blockOnDurableSend: every send
 * waits for the broker's response), {@code durable-async} (PERSISTENT, JMS 2.0 asynchronous
 * sends with a CompletionListener, at most WINDOW unconfirmed) or {@code non-durable}
 * (NON_PERSISTENT, the client's default non-blocking send). RATE 0 sends flat out; RATE &gt; 0
 * paces the producer at RATE msg/s. Every message carries the long property {@code bench_ts}
 * (System.nanoTime at send, one JVM so one clock) and {@code bench_seq}; the consumer records
 * receive time minus bench_ts. The consumer is created before the producer starts. Bounded:
 * the whole run gives up after TIMEOUT_S seconds (exit 3). With both connections up it prints
 * {@code {"ready": true}} and waits for a line on stdin before the first send.
 *
 * <p>Prints one JSON line: messages, elapsed_s (first send to last receipt), msgs_per_s,
 * p50_ms, p99_ms, received, duplicates, confirmed, t0_epoch_ms and t_end_epoch_ms (so the
 * caller can bracket broker CPU samples), or {"error": ...}.
 */
public final class CoreBench {
    private CoreBench() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 7) {
            System.out.println("{\"error\": \"usage: URL QUEUE MESSAGES SIZE MODE RATE TIMEOUT_S [WINDOW]\"}");
            System.exit(2);
        }
        final String url = args[0];
        final String queueName = args[1];
        final int n = Integer.parseInt(args[2]);
        final int size = Integer.parseInt(args[3]);
        final String mode = args[4];
        final double rate = Double.parseDouble(args[5]);
        final long deadline = System.nanoTime() + (long) (Double.parseDouble(args[6]) * 1e9);
        final int window = args.length > 7 ? Integer.parseInt(args[7]) : 1000;
        final boolean durable = !mode.equals("non-durable");
        final boolean async = mode.equals("durable-async");
        if (!durable && !mode.equals("non-durable") || durable && !async && !mode.equals("durable-blocking")) {
            System.out.println("{\"error\": \"bad mode " + mode + "\"}");
            System.exit(2);
        }

        ActiveMQConnectionFactory factory = new ActiveMQConnectionFactory(url);
        if (async) {
            // confirmations (SESS_SEND responses) feed the CompletionListener
            factory.setConfirmationWindowSize(1024 * 1024);
        }
        final long[] latency = new long[n];
        final boolean[] seen = new boolean[n];
        final AtomicLong lastReceipt = new AtomicLong();
        final AtomicReference<Throwable> failure = new AtomicReference<>();
        final long[] counts = new long[2]; // received, duplicates
        try (Connection consConn = factory.createConnection();
                Connection prodConn = factory.createConnection()) {
            Session cs = consConn.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = cs.createQueue(queueName);
            MessageConsumer consumer = cs.createConsumer(queue);
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
            producer.setDeliveryMode(durable ? DeliveryMode.PERSISTENT : DeliveryMode.NON_PERSISTENT);
            producer.setDisableMessageID(true);
            producer.setDisableMessageTimestamp(true);
            byte[] body = new byte[size];
            Arrays.fill(body, (byte) 'x');
            final Semaphore outstanding = new Semaphore(window);
            final AtomicLong confirmed = new AtomicLong();
            CompletionListener listener = new CompletionListener() {
                @Override
                public void onCompletion(Message message) {
                    confirmed.incrementAndGet();
                    outstanding.release();
                }

                @Override
                public void onException(Message message, Exception e) {
                    failure.compareAndSet(null, e);
                    outstanding.release();
                }
            };
            consumerThread.start();
            // the caller samples the broker's CPU between "ready" and its "go" line
            System.out.println("{\"ready\": true}");
            System.out.flush();
            new java.io.BufferedReader(new java.io.InputStreamReader(System.in,
                    java.nio.charset.StandardCharsets.UTF_8)).readLine();
            long t0Epoch = System.currentTimeMillis();
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
                BytesMessage m = ps.createBytesMessage();
                m.writeBytes(body);
                m.setIntProperty("bench_seq", i);
                m.setLongProperty("bench_ts", System.nanoTime());
                if (async) {
                    long left = deadline - System.nanoTime();
                    if (!outstanding.tryAcquire(Math.max(left, 0), TimeUnit.NANOSECONDS)) {
                        break;
                    }
                    producer.send(m, listener);
                } else {
                    producer.send(m);
                }
            }
            consumerThread.join(Math.max(1, (deadline - System.nanoTime()) / 1_000_000));
            long tEndEpoch = System.currentTimeMillis();
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
            System.out.println(String.format(java.util.Locale.ROOT,
                    "{\"messages\": %d, \"elapsed_s\": %.6f, \"msgs_per_s\": %.1f, \"p50_ms\": %.3f, "
                            + "\"p99_ms\": %.3f, \"received\": %d, \"duplicates\": %d, \"confirmed\": %d, "
                            + "\"t0_epoch_ms\": %d, \"t_end_epoch_ms\": %d}",
                    n, elapsed, n / elapsed, lat[(int) ((n - 1) * 0.50)] / 1e6, lat[(int) ((n - 1) * 0.99)] / 1e6,
                    counts[0], counts[1], async ? confirmed.get() : (durable ? n : 0), t0Epoch, tEndEpoch));
            System.out.flush();
        }
    }
}
