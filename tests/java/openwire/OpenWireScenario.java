import java.io.Serializable;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Enumeration;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import javax.jms.BytesMessage;
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
import javax.jms.TemporaryQueue;
import javax.jms.TemporaryTopic;
import javax.jms.TextMessage;
import javax.jms.Topic;
import javax.jms.XAConnection;
import javax.jms.XASession;
import javax.transaction.xa.XAException;
import javax.transaction.xa.XAResource;

import org.apache.activemq.ActiveMQConnection;
import org.apache.activemq.ActiveMQConnectionFactory;
import org.apache.activemq.ActiveMQMessageConsumer;
import org.apache.activemq.ActiveMQSession;
import org.apache.activemq.ActiveMQXAConnectionFactory;
import org.apache.activemq.transport.DefaultTransportListener;

/**
 * A scripted OpenWire client for the tests: the real ActiveMQ Classic JMS client, driven by JSON.
 *
 * <p>One source for both clients the tests run: Debian's 5.17 client (javax.jms, JMS 1.1) and
 * the 6.x client (jakarta.jms), so it uses the JMS 1.1 API only; tests/classic/client.py
 * compiles it as written against the first and with its {@code javax.jms} imports read as
 * {@code jakarta.jms} against the second. Reads one JSON command per line on stdin, runs them
 * in order over one connection and one current session, prints one JSON result line per
 * command ({@code "ok": true}, or false with an {@code "error"}) and event lines ({@code
 * "event": ...}). The first failed command ends the run. Exit status: 0 every command ran, 1 a
 * command failed, 2 the input was not understood. tests/classic/client.py documents the
 * commands; the typed-value encoding is tests/artemis/jms.py's ({@code {"int": 3}}, ...).
 */
public final class OpenWireScenario extends ScenarioSupport {
    private Connection connection;
    private Session session;
    private Message lastReceived;
    private final Map<String, MessageConsumer> consumers = new HashMap<>();
    private final Map<String, Destination> temps = new HashMap<>();
    private XAResource xaResource;

    public static void main(String[] args) throws Exception {
        List<Map<String, Object>> commands = List.of();
        try {
            commands = readCommands(System.in);
        } catch (RuntimeException e) {
            System.err.println("OpenWireScenario: bad input: " + e);
            System.exit(2);
        }
        System.exit(new OpenWireScenario().run(commands));
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
            } catch (IllegalArgumentException | ClassCastException e) {
                System.err.println("OpenWireScenario: bad command " + command + ": " + e);
                status = 2;
                break;
            } catch (Exception e) {
                result.put("ok", false);
                result.put("error", describe(e));
                status = 1;
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
            case "connect" -> connect(c, result);
            case "xa_connect" -> xaConnect(c, result);
            case "info" -> info(result);
            case "session" -> session = newSession(c);
            case "temp_queue" -> result.put("name", name(temp(c, session.createTemporaryQueue())));
            case "temp_topic" -> result.put("name", name(temp(c, session.createTemporaryTopic())));
            case "delete_temp" -> deleteTemp(str(c, "id", null));
            case "send" -> send(c, result);
            case "consumer" -> consumers.put(str(c, "id", null), consumer(c));
            case "receive" -> receive(c, result);
            case "serve" -> serve(c, result);
            case "close_consumer" -> consumers.remove(str(c, "id", null)).close();
            case "prefetched" -> result.put("prefetched", (long) prefetched(c));
            case "browse" -> browse(c, result);
            case "acknowledge" -> lastReceived.acknowledge();
            case "commit" -> session.commit();
            case "rollback" -> session.rollback();
            case "recover" -> session.recover();
            case "unsubscribe" -> session.unsubscribe(str(c, "name", null));
            case "close" -> closeConnection();
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
            case "await_exceptions" -> result.put("exceptions", awaitExceptions(c));
            case "xa_recover" -> result.put("xids", xids(xaResource.recover(XAResource.TMSTARTRSCAN | XAResource.TMENDRSCAN)));
            default -> throw new IllegalArgumentException("unknown op " + op);
        }
    }

    // ------------------------------------------------------------------ connection, session

    private void connect(Map<String, Object> c, Map<String, Object> result) throws JMSException {
        closeConnection();
        ActiveMQConnectionFactory factory = new ActiveMQConnectionFactory(str(c, "url", null));
        String user = str(c, "user", null);
        connection = user == null ? factory.createConnection() : factory.createConnection(user, str(c, "password", null));
        opened(c, result);
        session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
    }

    /** A new XA connection (started) and one XA session: its Session becomes the current one. */
    private void xaConnect(Map<String, Object> c, Map<String, Object> result) throws JMSException {
        closeConnection();
        ActiveMQXAConnectionFactory factory = new ActiveMQXAConnectionFactory(str(c, "url", null));
        String user = str(c, "user", null);
        XAConnection xa = user == null ? factory.createXAConnection()
                : factory.createXAConnection(user, str(c, "password", null));
        connection = xa;
        opened(c, result);
        XASession xaSession = xa.createXASession();
        session = xaSession.getSession();
        xaResource = xaSession.getXAResource();
    }

    /** Exceptions the connection's listener has heard (the client calls it on its own thread). */
    private final long[] exceptionsHeard = {0};

    /** Wait until the exception listener has heard ``count`` exceptions or ``timeout`` ms passed; how many it heard. */
    private long awaitExceptions(Map<String, Object> c) throws InterruptedException {
        long deadline = System.nanoTime() + num(c, "timeout", 5000) * 1_000_000L;
        long count = num(c, "count", 1);
        synchronized (exceptionsHeard) {
            while (exceptionsHeard[0] < count) {
                long left = (deadline - System.nanoTime()) / 1_000_000L;
                if (left <= 0) {
                    break;
                }
                exceptionsHeard.wait(left);
            }
            return exceptionsHeard[0];
        }
    }

    /** Listeners, the client ID, start; what the client negotiated and took from the URL. */
    private void opened(Map<String, Object> c, Map<String, Object> result) throws JMSException {
        connection.setExceptionListener(e -> {
            emit(event("exception", "error", describe(e)));
            synchronized (exceptionsHeard) {
                exceptionsHeard[0]++;
                exceptionsHeard.notifyAll();
            }
        });
        ActiveMQConnection amq = (ActiveMQConnection) connection;
        amq.addTransportListener(new DefaultTransportListener() {
            @Override
            public void transportInterupted() {
                emit(event("interrupted", null, null));
            }

            @Override
            public void transportResumed() {
                emit(event("resumed", null, null));
            }
        });
        String clientId = str(c, "clientId", null);
        if (clientId != null) {
            connection.setClientID(clientId);
        }
        connection.start();
        info(result);
    }

    /** What the connection negotiated and took from its URL, and where it is connected now. */
    private void info(Map<String, Object> result) throws JMSException {
        ActiveMQConnection amq = (ActiveMQConnection) connection;
        result.put("remoteAddress", amq.getTransport().getRemoteAddress());
        result.put("clientId", connection.getClientID());
        result.put("brokerName", amq.getBrokerName());
        result.put("protocolVersion", (long) amq.getProtocolVersion());
        result.put("queuePrefetch", (long) amq.getPrefetchPolicy().getQueuePrefetch());
        result.put("topicPrefetch", (long) amq.getPrefetchPolicy().getTopicPrefetch());
        result.put("useAsyncSend", amq.isUseAsyncSend());
        result.put("provider", connection.getMetaData().getProviderVersion());
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
            case "individual" -> ActiveMQSession.INDIVIDUAL_ACKNOWLEDGE;
            default -> throw new IllegalArgumentException("unknown ack mode " + ack);
        };
        return connection.createSession(false, mode);
    }

    private Destination temp(Map<String, Object> c, Destination d) {
        temps.put(str(c, "id", null), d);
        return d;
    }

    private void deleteTemp(String id) throws JMSException {
        Destination d = temps.remove(id);
        if (d instanceof TemporaryQueue q) {
            q.delete();
        } else if (d instanceof TemporaryTopic t) {
            t.delete();
        }
    }

    private void closeConnection() throws JMSException {
        consumers.clear();
        temps.clear();
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
            System.err.println("OpenWireScenario: closing the connection: " + e);
        }
    }

    /** The destination a command names: queue, topic, or temp (a temp_queue/temp_topic id). */
    private Destination destination(Map<String, Object> c, String prefix) throws JMSException {
        String queue = str(c, prefix.isEmpty() ? "queue" : prefix + "Queue", null);
        String topic = str(c, prefix.isEmpty() ? "topic" : prefix + "Topic", null);
        String temp = str(c, prefix.isEmpty() ? "temp" : prefix + "Temp", null);
        if (queue != null) {
            return session.createQueue(queue);
        }
        if (topic != null) {
            return session.createTopic(topic);
        }
        if (temp != null) {
            Destination d = temps.get(temp);
            if (d == null) {
                throw new IllegalArgumentException("no temporary destination " + temp);
            }
            return d;
        }
        if (prefix.isEmpty()) {
            throw new IllegalArgumentException("no queue, topic or temp");
        }
        return null;
    }

    // ------------------------------------------------------------------ send

    private void send(Map<String, Object> c, Map<String, Object> result) throws Exception {
        MessageProducer producer = session.createProducer(destination(c, ""));
        producer.setDeliveryMode(bool(c, "persistent", true) ? DeliveryMode.PERSISTENT : DeliveryMode.NON_PERSISTENT);
        producer.setPriority((int) num(c, "priority", Message.DEFAULT_PRIORITY));
        producer.setTimeToLive(num(c, "ttl", 0));
        long count = num(c, "count", 1);
        long progress = num(c, "progress", 0);
        boolean keepIds = bool(c, "ids", true);
        List<Object> ids = new ArrayList<>();
        if (keepIds) {
            result.put("ids", ids);
        }
        result.put("sent", 0L);
        for (long i = 0; i < count; i++) {
            Message m = message(c, i);
            producer.send(m);
            if (keepIds) {
                ids.add(m.getJMSMessageID());
            }
            result.put("sent", i + 1);
            if (progress > 0 && (i + 1) % progress == 0) {
                emit(event("progress", "sent", i + 1));
            }
        }
        producer.close();
    }

    private Message message(Map<String, Object> c, long index) throws Exception {
        String type = str(c, "type", "text");
        Object body = c.get("body");
        Message m;
        switch (type) {
            case "text" -> m = session.createTextMessage(String.valueOf(body == null ? "" : body).replace("{i}", Long.toString(index)));
            case "bytes" -> {
                BytesMessage b = session.createBytesMessage();
                b.writeBytes(Base64.getDecoder().decode(String.valueOf(body)));
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
        if (c.get("groups") != null) {  // a list of group ids: message i is in groups[i % n]
            List<?> groups = (List<?>) c.get("groups");
            m.setStringProperty("JMSXGroupID", String.valueOf(groups.get((int) (index % groups.size()))));
        }
        if (c.get("correlationId") != null) {
            m.setJMSCorrelationID(str(c, "correlationId", null));
        }
        if (c.get("jmsType") != null) {
            m.setJMSType(str(c, "jmsType", null));
        }
        Destination replyTo = destination(c, "replyTo");
        if (replyTo != null) {
            m.setJMSReplyTo(replyTo);
        }
        return m;
    }

    // ------------------------------------------------------------------ receive, serve, browse

    private MessageConsumer consumer(Map<String, Object> c) throws JMSException {
        Destination d = destination(c, "");
        String selector = str(c, "selector", null);
        String durable = str(c, "durable", null);
        if (durable != null) {
            return session.createDurableSubscriber((Topic) d, durable, selector, bool(c, "noLocal", false));
        }
        return session.createConsumer(d, selector, bool(c, "noLocal", false));
    }

    /**
     * Waits until consumer {@code id} holds at least {@code count} messages dispatched to it and
     * not yet received (its prefetch buffer), up to {@code timeout} ms; returns how many it holds.
     */
    private int prefetched(Map<String, Object> c) throws InterruptedException {
        ActiveMQMessageConsumer consumer = (ActiveMQMessageConsumer) consumers.get(str(c, "id", null));
        long deadline = System.nanoTime() + num(c, "timeout", 10000) * 1_000_000L;
        while (consumer.getMessageSize() < num(c, "count", 1) && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        return consumer.getMessageSize();
    }

    /**
     * Up to {@code count} messages from one consumer, or from several ({@code consumers}: ids,
     * polled in turn, each message saying which one had it); stops at the first {@code
     * timeout} (ms) with nothing from any of them.
     */
    private void receive(Map<String, Object> c, Map<String, Object> result) throws Exception {
        List<String> ids = new ArrayList<>();
        MessageConsumer own = null;
        if (c.get("consumers") != null) {
            for (Object id : (List<?>) c.get("consumers")) {
                ids.add(String.valueOf(id));
            }
        } else if (c.get("consumer") != null) {
            ids.add(str(c, "consumer", null));
        } else {
            own = consumer(c);
        }
        long count = num(c, "count", 1);
        long timeout = num(c, "timeout", 5000);
        String until = str(c, "until", null);
        boolean brief = bool(c, "brief", false);
        List<Object> messages = new ArrayList<>();
        result.put("messages", messages);
        try {
            long idleSince = System.nanoTime();
            int turn = 0;
            while (messages.size() < count) {
                String id = ids.isEmpty() ? null : ids.get(turn++ % ids.size());
                MessageConsumer consumer = id == null ? own : consumers.get(id);
                long wait = ids.size() > 1 ? 20 : timeout;
                Message m = wait > 0 ? consumer.receive(wait) : consumer.receiveNoWait();
                if (m == null) {
                    if (ids.size() <= 1 || System.nanoTime() - idleSince > timeout * 1_000_000L) {
                        break;
                    }
                    continue;
                }
                idleSince = System.nanoTime();
                lastReceived = m;
                Map<String, Object> d = brief ? briefly(m) : describe(m);
                if (ids.size() > 1) {
                    d.put("consumer", id);
                }
                messages.add(d);
                if (until != null && m instanceof TextMessage t && until.equals(t.getText())) {
                    break;
                }
            }
            if (bool(c, "acknowledge", false) && lastReceived != null) {
                lastReceived.acknowledge();
            }
        } finally {
            if (own != null) {
                own.close();
            }
        }
    }

    /**
     * The replying side of request/reply: up to {@code count} requests from the queue, each
     * answered on its JMSReplyTo with the text {@code prefix + request text}, correlated by the
     * request's message ID.
     */
    private void serve(Map<String, Object> c, Map<String, Object> result) throws Exception {
        MessageConsumer requests = session.createConsumer(destination(c, ""));
        MessageProducer replies = session.createProducer(null);
        long count = num(c, "count", 1);
        long timeout = num(c, "timeout", 5000);
        String prefix = str(c, "prefix", "re: ");
        List<Object> served = new ArrayList<>();
        result.put("served", served);
        try {
            for (long i = 0; i < count; i++) {
                Message request = requests.receive(timeout);
                if (request == null) {
                    break;
                }
                Map<String, Object> d = describe(request);
                served.add(d);
                TextMessage reply = session.createTextMessage(prefix + ((TextMessage) request).getText());
                reply.setJMSCorrelationID(request.getJMSMessageID());
                replies.send(request.getJMSReplyTo(), reply);
            }
        } finally {
            requests.close();
            replies.close();
        }
    }

    private void browse(Map<String, Object> c, Map<String, Object> result) throws Exception {
        QueueBrowser browser = session.createBrowser((Queue) destination(c, ""), str(c, "selector", null));
        List<Object> messages = new ArrayList<>();
        for (Enumeration<?> e = browser.getEnumeration(); e.hasMoreElements(); ) {
            messages.add(describe((Message) e.nextElement()));
        }
        browser.close();
        result.put("messages", messages);
    }

    /** A message as its text body and redelivered flag only (for runs of thousands). */
    private static Map<String, Object> briefly(Message m) throws Exception {
        Map<String, Object> d = new LinkedHashMap<>();
        d.put("body", m instanceof TextMessage t ? t.getText() : null);
        d.put("redelivered", m.getJMSRedelivered());
        return d;
    }

    private static Map<String, Object> describe(Message m) throws Exception {
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
        d.put("groupId", m.getStringProperty("JMSXGroupID"));
        d.put("deliveryCount", tag(m.getObjectProperty("JMSXDeliveryCount")));
        Map<String, Object> props = new LinkedHashMap<>();
        for (Enumeration<?> e = m.getPropertyNames(); e.hasMoreElements(); ) {
            String key = (String) e.nextElement();
            props.put(key, tag(m.getObjectProperty(key)));
        }
        d.put("properties", props);
        if (m instanceof TextMessage t) {
            d.put("type", "text");
            d.put("body", t.getText());
        } else if (m instanceof BytesMessage b) {
            d.put("type", "bytes");
            byte[] data = new byte[(int) b.getBodyLength()];
            b.readBytes(data);
            d.put("body", Base64.getEncoder().encodeToString(data));
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

    private static String name(Destination d) throws JMSException {
        if (d instanceof TemporaryQueue q) {
            return "temp-queue://" + q.getQueueName();
        }
        if (d instanceof TemporaryTopic t) {
            return "temp-topic://" + t.getTopicName();
        }
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
