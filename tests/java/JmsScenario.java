import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collections;
import java.util.Enumeration;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import javax.jms.BytesMessage;
import javax.jms.CompletionListener;
import javax.jms.Connection;
import javax.jms.DeliveryMode;
import javax.jms.Destination;
import javax.jms.JMSException;
import javax.jms.MapMessage;
import javax.jms.Message;
import javax.jms.MessageConsumer;
import javax.jms.MessageEOFException;
import javax.jms.MessageProducer;
import javax.jms.ObjectMessage;
import javax.jms.Queue;
import javax.jms.QueueBrowser;
import javax.jms.Session;
import javax.jms.StreamMessage;
import javax.jms.TextMessage;
import javax.jms.Topic;
import javax.jms.XAConnection;
import javax.jms.XASession;
import javax.transaction.xa.XAException;
import javax.transaction.xa.XAResource;

import org.apache.activemq.artemis.api.core.TransportConfiguration;
import org.apache.activemq.artemis.api.core.client.ClusterTopologyListener;
import org.apache.activemq.artemis.api.core.client.TopologyMember;
import org.apache.activemq.artemis.api.jms.ActiveMQJMSConstants;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;
import org.apache.activemq.artemis.jms.client.ActiveMQXAConnectionFactory;

/**
 * A scripted JMS client for the tests: the real Artemis JMS client, driven by JSON.
 *
 * <p>Reads one JSON command per line on stdin and runs them in order over one connection and
 * one current session; prints one JSON result line per command on stdout ({@code "ok": true}
 * or {@code false} with an {@code "error"}), plus event lines ({@code "event": ...}) for
 * progress and for asynchronous connection failures. The first failed command ends the run
 * (later commands depend on it). Exit status: 0 every command ran, 1 a command failed, 2 the
 * input was not understood. tests/artemis/jms.py documents the commands and the typed-value
 * encoding ({@code {"int": 3}}, {@code {"bytes": "<base64>"}}, ...).
 */
public final class JmsScenario extends ScenarioSupport {
    private static final int INDIVIDUAL_ACK = ActiveMQJMSConstants.INDIVIDUAL_ACKNOWLEDGE;

    private Connection connection;
    /** The factory of the current connection (its ServerLocator holds the cluster topology). */
    private ActiveMQConnectionFactory factory;
    private Session session;
    private Message lastReceived;
    private final Map<String, MessageConsumer> consumers = new HashMap<>();
    /** The XA session's resource (xa_connect), for the xa_* ops. */
    private XAResource xaResource;

    public static void main(String[] args) throws Exception {
        List<Map<String, Object>> commands = List.of();
        try {
            commands = readCommands(System.in);
        } catch (RuntimeException e) {
            System.err.println("JmsScenario: bad input: " + e);
            System.exit(2);
        }
        System.exit(new JmsScenario().run(commands));
    }

    private int run(List<Map<String, Object>> commands) {
        int status = 0;
        for (Map<String, Object> command : commands) {
            String op = String.valueOf(command.get("op"));
            Map<String, Object> result = new LinkedHashMap<>();
            result.put("op", op);
            try {
                execute(op, command, result);
                result.put("ok", true);
            } catch (IllegalArgumentException e) {
                System.err.println("JmsScenario: bad command " + command + ": " + e.getMessage());
                status = 2;
            } catch (Exception e) {
                result.put("ok", false);
                result.put("error", describe(e));
                if (!Boolean.TRUE.equals(command.get("mayFail"))) {
                    status = 1;
                }
            }
            if (status == 2) {
                break;
            }
            emit(result);
            if (status != 0) {
                break;
            }
        }
        closeQuietly();
        return status;
    }

    private void execute(String op, Map<String, Object> c, Map<String, Object> result) throws Exception {
        switch (op) {
            case "connect" -> connect(c);
            case "session" -> session = newSession(c);
            case "send" -> send(c, result);
            case "consumer" -> consumers.put(str(c, "id", null), consumer(c));
            case "receive" -> receive(c, result);
            case "close_consumer" -> consumers.remove(str(c, "id", null)).close();
            case "browse" -> browse(c, result);
            case "acknowledge" -> lastReceived.acknowledge();
            case "commit" -> session.commit();
            case "rollback" -> session.rollback();
            case "recover" -> session.recover();
            case "unsubscribe" -> session.unsubscribe(str(c, "name", null));
            case "close" -> closeConnection();
            case "wait_file" -> waitFile(c);
            case "topology" -> topology(c, result);
            case "xa_connect" -> xaConnect(c);
            case "xa_start" -> xaResource.start(xid(c), switch (str(c, "flags", "none")) {
                case "join" -> XAResource.TMJOIN;
                case "resume" -> XAResource.TMRESUME;
                default -> XAResource.TMNOFLAGS;
            });
            case "xa_end" -> xaResource.end(xid(c), switch (str(c, "flags", "success")) {
                case "fail" -> XAResource.TMFAIL;
                case "suspend" -> XAResource.TMSUSPEND;
                default -> XAResource.TMSUCCESS;
            });
            case "xa_prepare" -> result.put("vote", (long) xaResource.prepare(xid(c)));
            case "xa_commit" -> xaResource.commit(xid(c), bool(c, "onePhase", false));
            case "xa_rollback" -> xaResource.rollback(xid(c));
            case "xa_forget" -> xaResource.forget(xid(c));
            case "xa_recover" -> result.put("xids", xids(xaResource.recover(XAResource.TMSTARTRSCAN | XAResource.TMENDRSCAN)));
            case "xa_timeout" -> result.put("set", xaResource.setTransactionTimeout((int) num(c, "seconds", 0)));
            default -> throw new IllegalArgumentException("unknown op " + op);
        }
    }

    /** Blocks until the test creates {@code path} (its signal that the broker is back), or fails. */
    private static void waitFile(Map<String, Object> c) throws Exception {
        java.nio.file.Path path = java.nio.file.Path.of(str(c, "path", null));
        long deadline = System.nanoTime() + num(c, "timeout", 30000) * 1_000_000L;
        while (!java.nio.file.Files.exists(path)) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("no " + path + " within the timeout");
            }
            Thread.sleep(20);
        }
    }

    // ------------------------------------------------------------------ connection, session

    private void connect(Map<String, Object> c) throws JMSException {
        closeConnection();
        factory = new ActiveMQConnectionFactory(str(c, "url", null));
        if (bool(c, "watchTopology", false)) {
            factory.getServerLocator().addClusterTopologyListener(new ClusterTopologyListener() {
                @Override
                public void nodeUP(TopologyMember member, boolean last) {
                    Map<String, Object> event = describeMember(member);
                    event.put("event", "node_up");
                    event.put("last", last);
                    emit(event);
                }

                @Override
                public void nodeDown(long eventId, String nodeId) {
                    Map<String, Object> event = new LinkedHashMap<>();
                    event.put("event", "node_down");
                    event.put("nodeId", nodeId);
                    event.put("uniqueEventId", eventId);
                    emit(event);
                }
            });
        }
        String user = str(c, "user", null);
        connection = user == null ? factory.createConnection()
                : factory.createConnection(user, str(c, "password", null));
        connection.setExceptionListener(e -> {
            Map<String, Object> event = new LinkedHashMap<>();
            event.put("event", "exception");
            event.put("error", describe(e));
            emit(event);
        });
        String clientId = str(c, "clientId", null);
        if (clientId != null) {
            connection.setClientID(clientId);
        }
        connection.start();
        session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
    }

    /**
     * The cluster topology the client holds (its ServerLocator's): members, each with its node
     * id, event id and connectors. With "members": n, waits up to "timeout" ms for exactly n
     * ("reached" says whether they came).
     */
    private void topology(Map<String, Object> c, Map<String, Object> result) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(num(c, "timeout", 0));
        long wanted = num(c, "members", -1);
        List<Object> members = topologyMembers();
        while (wanted >= 0 && members.size() != wanted && System.nanoTime() < deadline) {
            Thread.sleep(20);  // the topology changes on the client's own threads: look again
            members = topologyMembers();
        }
        result.put("members", members);
        result.put("reached", wanted < 0 || members.size() == wanted);
    }

    private List<Object> topologyMembers() {
        List<Object> out = new ArrayList<>();
        for (TopologyMember member : factory.getServerLocator().getTopology().getMembers()) {
            out.add(describeMember(member));
        }
        return out;
    }

    private static Map<String, Object> describeMember(TopologyMember member) {
        Map<String, Object> d = new LinkedHashMap<>();
        d.put("nodeId", member.getNodeId());
        d.put("uniqueEventId", member.getUniqueEventID());
        d.put("primary", describeConnector(member.getPrimary()));
        d.put("backup", describeConnector(member.getBackup()));
        d.put("scaleDownGroupName", member.getScaleDownGroupName());
        return d;
    }

    private static Map<String, Object> describeConnector(TransportConfiguration connector) {
        if (connector == null) {
            return null;
        }
        Map<String, Object> params = new LinkedHashMap<>();
        for (Map.Entry<String, Object> e : connector.getParams().entrySet()) {
            params.put(e.getKey(), String.valueOf(e.getValue()));
        }
        Map<String, Object> d = new LinkedHashMap<>();
        d.put("name", connector.getName());
        d.put("factory", connector.getFactoryClassName());
        d.put("params", params);
        return d;
    }

    /** A new XA connection (started) and one XA session: its Session becomes the current one. */
    private void xaConnect(Map<String, Object> c) throws JMSException {
        closeConnection();
        ActiveMQXAConnectionFactory xaFactory = new ActiveMQXAConnectionFactory(str(c, "url", null));
        factory = xaFactory;
        String user = str(c, "user", null);
        XAConnection xa = user == null ? xaFactory.createXAConnection()
                : xaFactory.createXAConnection(user, str(c, "password", null));
        connection = xa;
        // failover events (FAILURE_DETECTED, FAILOVER_COMPLETED, FAILOVER_FAILED), for tests that
        // act once the client has reconnected
        ((org.apache.activemq.artemis.jms.client.ActiveMQConnection) xa).setFailoverListener(type -> {
            Map<String, Object> event = new LinkedHashMap<>();
            event.put("event", "failover");
            event.put("type", type.toString());
            emit(event);
        });
        connection.start();
        XASession xaSession = xa.createXASession();
        session = xaSession.getSession();
        xaResource = xaSession.getXAResource();
    }

    private Session newSession(Map<String, Object> c) throws JMSException {
        if (bool(c, "transacted", false)) {
            return connection.createSession(true, Session.SESSION_TRANSACTED);
        }
        String ack = str(c, "ack", "auto");
        int mode = switch (ack) {
            case "auto" -> Session.AUTO_ACKNOWLEDGE;
            case "client" -> Session.CLIENT_ACKNOWLEDGE;
            case "dups_ok" -> Session.DUPS_OK_ACKNOWLEDGE;
            case "individual" -> INDIVIDUAL_ACK;
            default -> throw new IllegalArgumentException("unknown ack mode " + ack);
        };
        return connection.createSession(false, mode);
    }

    private void closeConnection() throws JMSException {
        consumers.clear();
        xaResource = null;
        if (connection != null) {
            Connection c = connection;
            connection = null;
            session = null;
            c.close();
        }
    }

    private void closeQuietly() {
        try {
            closeConnection();
        } catch (Exception e) {
            System.err.println("JmsScenario: closing the connection: " + e);
        }
    }

    private Destination destination(Map<String, Object> c) throws JMSException {
        if (c.containsKey("queue")) {
            return session.createQueue(str(c, "queue", null));
        }
        if (c.containsKey("topic")) {
            return session.createTopic(str(c, "topic", null));
        }
        throw new IllegalArgumentException("no queue or topic");
    }

    // ------------------------------------------------------------------ send

    private void send(Map<String, Object> c, Map<String, Object> result) throws Exception {
        MessageProducer producer = session.createProducer(destination(c));
        producer.setDeliveryMode(bool(c, "persistent", true) ? DeliveryMode.PERSISTENT : DeliveryMode.NON_PERSISTENT);
        producer.setPriority((int) num(c, "priority", Message.DEFAULT_PRIORITY));
        producer.setTimeToLive(num(c, "ttl", 0));
        producer.setDeliveryDelay(num(c, "delay", 0));
        long count = num(c, "count", 1);
        long progress = num(c, "progress", 0);
        boolean async = bool(c, "completion", false);
        List<Object> ids = new ArrayList<>();
        List<Object> failed = Collections.synchronizedList(new ArrayList<>());
        CountDownLatch completions = new CountDownLatch((int) (async ? count : 0));
        result.put("ids", ids);
        result.put("sent", 0L);
        for (long i = 0; i < count; i++) {
            Message m = message(c, i);
            if (async) {
                producer.send(m, new CompletionListener() {
                    public void onCompletion(Message message) {
                        completions.countDown();
                    }

                    public void onException(Message message, Exception e) {
                        failed.add(describe(e));
                        completions.countDown();
                    }
                });
            } else {
                producer.send(m);
            }
            ids.add(m.getJMSMessageID());
            result.put("sent", i + 1);
            if (progress > 0 && (i + 1) % progress == 0) {
                emit(Map.of("event", "progress", "sent", i + 1));
            }
        }
        if (async) {
            long waitMs = num(c, "completionTimeout", 30000);
            result.put("completed", completions.await(waitMs, TimeUnit.MILLISECONDS));
            result.put("failed", failed);
        }
        producer.close();
    }

    private Message message(Map<String, Object> c, long index) throws Exception {
        String type = str(c, "type", "text");
        Object body = c.get("body");
        long size = num(c, "size", -1);
        Message m;
        switch (type) {
            case "text" -> {
                String text = size >= 0 ? new String(pattern((int) size), StandardCharsets.ISO_8859_1)
                        : String.valueOf(body == null ? "" : body).replace("{i}", Long.toString(index));
                m = session.createTextMessage(text);
            }
            case "bytes" -> {
                BytesMessage b = session.createBytesMessage();
                b.writeBytes(size >= 0 ? pattern((int) size) : Base64.getDecoder().decode(String.valueOf(body)));
                m = b;
            }
            case "map" -> {
                MapMessage map = session.createMapMessage();
                for (Map.Entry<String, Object> e : asMap(body).entrySet()) {
                    map.setObject(e.getKey(), typed(e.getValue()));
                }
                m = map;
            }
            case "object" -> m = session.createObjectMessage((Serializable) typed(body));
            case "stream" -> {
                StreamMessage s = session.createStreamMessage();
                for (Object v : (List<?>) body) {
                    s.writeObject(typed(v));
                }
                m = s;
            }
            case "message" -> m = session.createMessage();
            default -> throw new IllegalArgumentException("unknown message type " + type);
        }
        if (c.get("properties") != null) {
            for (Map.Entry<String, Object> e : asMap(c.get("properties")).entrySet()) {
                m.setObjectProperty(e.getKey(), typed(e.getValue()));
            }
        }
        if (c.get("indexProperty") != null) {
            m.setLongProperty(str(c, "indexProperty", null), index);
        }
        if (c.get("correlationId") != null) {
            m.setJMSCorrelationID(str(c, "correlationId", null));
        }
        if (c.get("jmsType") != null) {
            m.setJMSType(str(c, "jmsType", null));
        }
        if (c.get("replyTo") != null) {
            String to = str(c, "replyTo", null);
            m.setJMSReplyTo(to.startsWith("topic://") ? session.createTopic(to.substring(8)) : session.createQueue(to));
        }
        return m;
    }

    /** The body of a {@code "size"} message: byte i is i % 251 (tests/artemis/jms.py pattern()). */
    private static byte[] pattern(int size) {
        byte[] b = new byte[size];
        for (int i = 0; i < size; i++) {
            b[i] = (byte) (i % 251);
        }
        return b;
    }

    // ------------------------------------------------------------------ receive, browse

    private MessageConsumer consumer(Map<String, Object> c) throws JMSException {
        Destination d = destination(c);
        String selector = str(c, "selector", null);
        String durable = str(c, "durable", null);
        String shared = str(c, "shared", null);
        if (durable != null) {
            return bool(c, "sharedDurable", false) ? session.createSharedDurableConsumer((Topic) d, durable, selector)
                    : session.createDurableSubscriber((Topic) d, durable, selector, bool(c, "noLocal", false));
        }
        if (shared != null) {
            return session.createSharedConsumer((Topic) d, shared, selector);
        }
        return session.createConsumer(d, selector, bool(c, "noLocal", false));
    }

    private void receive(Map<String, Object> c, Map<String, Object> result) throws Exception {
        String id = str(c, "consumer", null);
        MessageConsumer consumer = id != null ? consumers.get(id) : consumer(c);
        long count = num(c, "count", 1);
        long timeout = num(c, "timeout", 5000);
        boolean digest = bool(c, "digest", false);
        String until = str(c, "until", null);
        List<Object> messages = new ArrayList<>();
        result.put("messages", messages);
        try {
            for (long i = 0; i < count; i++) {
                Message m = timeout > 0 ? consumer.receive(timeout) : consumer.receiveNoWait();
                if (m == null) {
                    break;
                }
                lastReceived = m;
                messages.add(describe(m, digest));
                if (until != null && m instanceof TextMessage t && until.equals(t.getText())) {
                    break;
                }
            }
            if (bool(c, "acknowledge", false) && lastReceived != null) {
                lastReceived.acknowledge();
            }
        } finally {
            if (id == null) {
                consumer.close();
            }
        }
    }

    private void browse(Map<String, Object> c, Map<String, Object> result) throws Exception {
        QueueBrowser browser = session.createBrowser((Queue) destination(c), str(c, "selector", null));
        List<Object> messages = new ArrayList<>();
        for (Enumeration<?> e = browser.getEnumeration(); e.hasMoreElements(); ) {
            messages.add(describe((Message) e.nextElement(), bool(c, "digest", false)));
        }
        browser.close();
        result.put("messages", messages);
    }

    private static Map<String, Object> describe(Message m, boolean digest) throws Exception {
        Map<String, Object> d = new LinkedHashMap<>();
        d.put("id", m.getJMSMessageID());
        d.put("destination", name(m.getJMSDestination()));
        d.put("persistent", m.getJMSDeliveryMode() == DeliveryMode.PERSISTENT);
        d.put("priority", (long) m.getJMSPriority());
        d.put("redelivered", m.getJMSRedelivered());
        d.put("timestamp", m.getJMSTimestamp());
        d.put("expiration", m.getJMSExpiration());
        d.put("correlationId", m.getJMSCorrelationID());
        d.put("jmsType", m.getJMSType());
        d.put("replyTo", name(m.getJMSReplyTo()));
        Map<String, Object> props = new LinkedHashMap<>();
        for (Enumeration<?> e = m.getPropertyNames(); e.hasMoreElements(); ) {
            String key = (String) e.nextElement();
            props.put(key, tag(m.getObjectProperty(key)));
        }
        d.put("properties", props);
        if (m instanceof TextMessage t) {
            d.put("type", "text");
            String text = t.getText();
            putBody(d, text == null ? null : text.getBytes(StandardCharsets.UTF_8), text, digest);
        } else if (m instanceof BytesMessage b) {
            d.put("type", "bytes");
            byte[] data = new byte[(int) b.getBodyLength()];
            b.readBytes(data);
            putBody(d, data, Base64.getEncoder().encodeToString(data), digest);
        } else if (m instanceof MapMessage map) {
            d.put("type", "map");
            Map<String, Object> body = new LinkedHashMap<>();
            for (Enumeration<?> e = map.getMapNames(); e.hasMoreElements(); ) {
                String key = (String) e.nextElement();
                body.put(key, tag(map.getObject(key)));
            }
            d.put("body", body);
        } else if (m instanceof ObjectMessage o) {
            d.put("type", "object");
            d.put("body", tag(o.getObject()));
        } else if (m instanceof StreamMessage s) {
            d.put("type", "stream");
            List<Object> body = new ArrayList<>();
            try {
                while (true) {
                    body.add(tag(s.readObject()));
                }
            } catch (MessageEOFException end) {
                d.put("body", body);
            }
        } else {
            d.put("type", "message");
        }
        return d;
    }

    private static void putBody(Map<String, Object> d, byte[] data, Object body, boolean digest) throws Exception {
        if (!digest || data == null) {
            d.put("body", body);
            return;
        }
        d.put("size", (long) data.length);
        StringBuilder hex = new StringBuilder();
        for (byte b : MessageDigest.getInstance("SHA-256").digest(data)) {
            hex.append(String.format("%02x", b));
        }
        d.put("sha256", hex.toString());
    }

    private static String name(Destination d) throws JMSException {
        if (d instanceof Queue q) {
            return "queue://" + q.getQueueName();
        }
        if (d instanceof Topic t) {
            return "topic://" + t.getTopicName();
        }
        return d == null ? null : d.toString();
    }

    /** A failure as a result's "error": class, message, JMS error code, XA code, cause. */
    private static Map<String, Object> describe(Exception e) {
        Map<String, Object> d = new LinkedHashMap<>();
        d.put("class", e.getClass().getName());
        d.put("message", e.getMessage());
        if (e instanceof JMSException j) {
            d.put("errorCode", j.getErrorCode());
        }
        if (e instanceof XAException x) {
            d.put("xaErrorCode", (long) x.errorCode);
        }
        Throwable cause = e.getCause();
        if (cause != null) {
            d.put("cause", cause.getClass().getName() + ": " + cause.getMessage());
        }
        return d;
    }
}
