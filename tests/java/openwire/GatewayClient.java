// The real ActiveMQ Classic JMS client over one connection, for the gateway's OpenWire tests.
//
// Usage: GatewayClient <url> <user> <password> <clientId> <queue> <count>
// Connects (the clientId set before the connection's first use, so its ConnectionInfo
// carries it), sends <count> text messages "m<i>" to <queue>, receives them back, and prints
// one JSON line: {"ok":true,"remote":"<the transport's remote address>","received":[...]}
// or, when anything throws, {"ok":false,"class":"<exception class>","message":"...",
// "cause":"<class>: <message>"}.
import javax.jms.Connection;
import javax.jms.JMSException;
import javax.jms.Message;
import javax.jms.MessageConsumer;
import javax.jms.MessageProducer;
import javax.jms.Queue;
import javax.jms.Session;
import javax.jms.TextMessage;
import org.apache.activemq.ActiveMQConnection;
import org.apache.activemq.ActiveMQConnectionFactory;

public final class GatewayClient {
    private GatewayClient() {}

    private static String quote(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }

    public static void main(String[] args) {
        String url = args[0];
        String user = args[1];
        String password = args[2];
        String clientId = args[3];
        String queueName = args[4];
        int count = Integer.parseInt(args[5]);
        Connection connection = null;
        String result;
        try {
            connection = new ActiveMQConnectionFactory(url).createConnection(user, password);
            connection.setClientID(clientId);
            connection.start();
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = session.createQueue(queueName);
            MessageProducer producer = session.createProducer(queue);
            for (int i = 0; i < count; i++) {
                producer.send(session.createTextMessage("m" + i));
            }
            MessageConsumer consumer = session.createConsumer(queue);
            StringBuilder received = new StringBuilder("[");
            for (int i = 0; i < count; i++) {
                Message m = consumer.receive(10000);
                if (i > 0) {
                    received.append(',');
                }
                received.append(m == null ? "null" : quote(((TextMessage) m).getText()));
            }
            received.append(']');
            String remote = ((ActiveMQConnection) connection).getTransport().getRemoteAddress();
            result = "{\"ok\":true,\"remote\":" + quote(remote) + ",\"received\":" + received + "}";
        } catch (JMSException | RuntimeException e) {
            Throwable cause = e.getCause();
            result = "{\"ok\":false,\"class\":" + quote(e.getClass().getName()) + ",\"message\":"
                    + quote(e.getMessage()) + ",\"cause\":"
                    + quote(cause == null ? null : cause.getClass().getName() + ": " + cause.getMessage()) + "}";
        }
        System.out.println(result);
        System.out.flush();
        if (connection != null) {
            try {
                connection.close();
            } catch (JMSException e) {
                // closing after a failure: nothing more to report
            }
        }
        System.exit(0);
    }
}
